import { handle } from "@jigging/flow";

// The stand-in for an Agent's proposal: subtraction where addition was meant.
function propose(files: Record<string, string>): Record<string, string> {
  const next = { ...files };
  next["src/add.ts"] = files["src/add.ts"].replace("a - b", "a + b");
  return next;
}

await handle(async (run) => {
  const files = (run.input as { files: Record<string, string> }).files;
  const test = (candidate: Record<string, string>, id: string) =>
    run.callCapability({ operationId: id, slot: "project", method: "run", input: { command: "tests", files: candidate } }) as Promise<{
      exitCode: number | null;
      candidateDigest: string;
    }>;
  const before = await test(files, "tests:before");
  const proposed = propose(files);
  const after = await test(proposed, "tests:after");
  return {
    outcome: after.exitCode === 0 ? "repaired" : "unrepaired",
    output: {
      before: { exitCode: before.exitCode, candidateDigest: before.candidateDigest },
      after: { exitCode: after.exitCode, candidateDigest: after.candidateDigest },
      change: proposed["src/add.ts"],
    },
  };
});
