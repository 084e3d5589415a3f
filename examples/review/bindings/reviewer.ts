import { defineBinding } from "@jigging/jig";

// The review Flow, bound as the `reviewer` target. Its Agent endpoint is
// host configuration (see README.md), never part of the project.
export default defineBinding({
  package: "./flows/review",
});
