// Code blocks of the README, for tests that run what the README tells users to write.

/** The first ```ts block after `marker` in `text`, with its trailing newline. */
export function readmeBlockAfter(text: string, marker: string): string {
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`README has no "${marker}"`);
  const open = text.indexOf("```ts\n", at);
  const close = text.indexOf("\n```\n", open);
  if (open < 0 || close < 0) throw new Error(`no \`\`\`ts block after "${marker}"`);
  return text.slice(open + "```ts\n".length, close + 1);
}

/** The sentence that introduces the harness example (a vitest file users copy). */
export const HARNESS_MARKER = "A vitest file that tests a @grpc/grpc-js client's retry policy";
