// letta-code's own sliding-window planner, timed on letta's benchmark conversation.
//
//   node bench/letta_planner.mjs <package/letta.js> <rounds> <n>:<calls> [<n>:<calls> ...]
//
// The published @letta-ai/letta-code bundle defines its local compaction helpers as top-level
// `function name(...) {` ... `}` blocks; the ones the planner calls are cut out as written and
// compiled together, so what runs is letta's code and nothing else of the CLI. For each size the
// planner is called once to warm the JIT, then `rounds` times `calls` calls are timed; each
// round's mean per call is printed, one JSON line per size: wall-clock ms, and CPU ms of the
// whole process (node's collector works on threads of its own), with the cut and the token
// total as checks.
import { readFileSync } from "node:fs";

const PLANNER_FUNCTIONS = [
  "textLength",
  "jsonLength",
  "estimateLocalMessageTokens",
  "estimateLocalMessagesTokens",
  "estimateLocalMessageTokens2",
  "hasPendingLocalToolCall",
  "normalizedSlidingWindowPercentage",
  "isValidSlidingWindowCutoff",
  "planLocalSlidingWindowCompaction",
];

function letta(bundlePath) {
  const text = readFileSync(bundlePath, "utf8");
  const lines = text.split("\n");
  const bodies = PLANNER_FUNCTIONS.map((name) => {
    const first = lines.findIndex((line) => line.startsWith(`function ${name}(`));
    if (first < 0) throw new Error(`${bundlePath}: no top-level function ${name}`);
    const last = lines.indexOf("}", first);
    return lines.slice(first, last + 1).join("\n");
  });
  const constant = (name) => {
    const found = text.match(new RegExp(`\\b${name} = ([0-9.]+)`));
    if (!found) throw new Error(`${bundlePath}: no constant ${name}`);
    return `var ${name} = ${found[1]};`;
  };
  const source = [
    constant("IMAGE_TOKEN_ESTIMATE"),
    constant("LOCAL_DEFAULT_SLIDING_WINDOW_PERCENTAGE"),
    "class LocalSlidingWindowCompactionPlanningError extends Error {}",
    ...bodies,
    "return { planLocalSlidingWindowCompaction, estimateLocalMessagesTokens };",
  ].join("\n");
  return new Function(source)();
}

// letta's benchmark conversation: a user asks, the assistant answers with one Read call, the
// tool returns 400 characters; repeated. (precis builds the same messages in bench/planning.py.)
function conversation(n) {
  const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  const messages = [];
  for (let i = 0; i < n; i++) {
    if (i % 3 === 0) {
      messages.push({ id: "m" + i, role: "user",
        content: "please look at src/app.py and fix the bug number " + i, timestamp: 1 });
    } else if (i % 3 === 1) {
      messages.push({ id: "m" + i, role: "assistant",
        content: [{ type: "text", text: "reading the file" },
          { type: "toolCall", id: "c" + i, name: "Read", arguments: { path: "src/app.py", line: i } }],
        api: "x", provider: "x", model: "m", usage, stopReason: "stop", timestamp: 1 });
    } else {
      messages.push({ id: "m" + i, role: "toolResult", toolCallId: "c" + (i - 1), toolName: "Read",
        content: [{ type: "text", text: "x".repeat(400) }], isError: false, timestamp: 1 });
    }
  }
  return messages;
}

const [bundlePath, roundsArg, ...sizes] = process.argv.slice(2);
const L = letta(bundlePath);
const rounds = Number(roundsArg);
for (const size of sizes) {
  const [n, calls] = size.split(":").map(Number);
  const messages = conversation(n);
  const total = L.estimateLocalMessagesTokens(messages);
  const contextWindow = Math.floor(total * 0.5);
  const plan = L.planLocalSlidingWindowCompaction(messages, { contextWindow });
  const wall = [];
  const cpu = [];
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint();
    const used = process.cpuUsage();
    for (let c = 0; c < calls; c++) L.planLocalSlidingWindowCompaction(messages, { contextWindow });
    const spent = process.cpuUsage(used);
    wall.push(Number(process.hrtime.bigint() - start) / 1e6 / calls);
    cpu.push((spent.user + spent.system) / 1e3 / calls);
  }
  console.log(JSON.stringify({ n, total_tokens: total, window: contextWindow,
    cutoff: plan.cutoffIndex, wall, cpu }));
}
