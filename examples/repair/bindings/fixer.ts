import { defineBinding } from "@jigging/jig";

// The project's reviewed commands: its tests, with a short timeout.
export default defineBinding({
  package: "flows/repair",
  commands: {
    tests: { test: ["test/add.test.ts"], timeout: "30s" },
  },
});
