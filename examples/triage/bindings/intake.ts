import { defineBinding } from "@jigging/jig";

// The intake Flow asks its `classifier` slot to label each request; this
// Binding chooses the code classifier for that slot.
export default defineBinding({
  package: "./flows/intake",
  slots: {
    classifier: "flow:./flows/code",
  },
});
