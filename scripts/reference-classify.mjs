// The reference policy's classification rules, as JavaScript regexps run by
// V8, timed on the same inputs as the Go benchmarks of package classify, so
// that docs/performance.md can give both sides measured in one sitting.
//
// The rules are the ones docs/policy.md §2.1–2.4 states (the `seed` set): the
// overflow patterns with their throttle exception and the bodyless 400/413,
// then the retry pattern set, then the usage-limit sub-rule, and the retry
// hints of a usage-limit message (the only place the reference reads them).
// It also prints how many messages each class got; on the original set
// these are the counts TestSeedAnswersTheOriginalSetAsTheReference (package
// classify) requires of the Go seed rules.
//
// Usage: node scripts/reference-classify.mjs CORPUS.tsv PAGE [SET]
// SET limits the corpus to one set of rows ("original": the benchmarks' 83).
import { readFileSync } from "node:fs";

const OVERFLOW = [
  /prompt is too long/i,
  /input is too long for requested model/i,
  /exceeds the context window/i,
  /input token count.*exceeds the maximum/i,
  /maximum prompt length is \d+/i,
  /reduce the length of the messages/i,
  /maximum context length is \d+ tokens/i,
  /exceeds the limit of \d+/i,
  /exceeds the available context size/i,
  /requested tokens?.*exceed.*context (window|length|size)/i,
  /context (window|length|size).*(exceeded|overflow|too small)/i,
  /(prompt|input).*(too long|too large).*(context|n_ctx)/i,
  /requested tokens?.*(exceeds?|greater than).*(n_ctx|context)/i,
  /greater than the context length/i,
  /context window exceeds limit/i,
  /exceeded model token limit/i,
  /too large for model with \d+ maximum context length/i,
  /model_context_window_exceeded/i,
  /context[_ ]length[_ ]exceeded/i,
  /too many tokens/i,
  /token limit exceeded/i,
  /request_too_large/i,
];
const NOT_OVERFLOW = [/^(Throttling error|Service unavailable):/i, /rate limit/i, /too many requests/i];
const BODYLESS = /^4(00|13)\s*(status code)?\s*\(no body\)/i;
const RETRY =
  /overloaded|rate.?limit|usage.?limit|too many requests|429|500|502|503|504|service.?unavailable|server error|internal error|connection.?error|fetch failed|retry delay/i;
const USAGE = /usage.?limit|usage_limit_reached|limit_reached/i;
const HINTS = [
  /retry-after-ms\s*[:=]\s*(\d+)/i,
  /retry-after\s*[:=]\s*([^\s,;]+)/i,
  /x-ratelimit-reset-ms\s*[:=]\s*(\d+)/i,
  /x-ratelimit-reset\s*[:=]\s*(\d+)/i,
];

function isOverflow(text) {
  if (!text) return false;
  if (NOT_OVERFLOW.some((p) => p.test(text))) return false;
  return OVERFLOW.some((p) => p.test(text)) || BODYLESS.test(text);
}

function hint(text) {
  for (const p of HINTS) {
    const m = p.exec(text);
    if (m) return m[1];
  }
  return undefined;
}

// classify answers as the reference does for an assistant message whose
// stopReason is "error".
function classify(text) {
  if (isOverflow(text)) return "overflow";
  if (!text || !RETRY.test(text)) return "fatal";
  if (USAGE.test(text)) {
    hint(text);
    return "retryable+usage";
  }
  return "retryable";
}

// corpus reads the corpus as the Go tests do: # lines are comments, "# rows:
// NAME" starts the set NAME, the first other line is the header, and every
// other line is a row whose third field is the message (kept as written).
function corpus(path, wantSet) {
  let set = "";
  let header = false;
  const out = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.startsWith("#")) {
      const m = /^#\s*rows:\s*(\S+)/.exec(line);
      if (m) set = m[1];
      continue;
    }
    if (line === "") continue;
    if (!header) {
      header = true;
      continue;
    }
    const f = line.split("\t");
    if (f.length === 4 && (!wantSet || set === wantSet)) out.push(f[2]);
  }
  return out;
}

// bench runs op until at least a second has passed, after a warm-up, and
// returns the best of five such rounds in µs per op.
function bench(op) {
  let sink = 0;
  for (let i = 0; i < 200; i++) sink += op().length;
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    let n = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0n;
    while (elapsed < 1_000_000_000n) {
      for (let i = 0; i < 20; i++) sink += op().length;
      n += 20;
      elapsed = process.hrtime.bigint() - start;
    }
    best = Math.min(best, Number(elapsed) / 1000 / n);
  }
  if (sink < 0) console.log(sink);
  return best;
}

const [corpusPath, pagePath, wantSet] = process.argv.slice(2);
if (!corpusPath || !pagePath) {
  console.error("usage: node reference-classify.mjs CORPUS.tsv PAGE [SET]");
  process.exit(2);
}
const messages = corpus(corpusPath, wantSet);
const page = readFileSync(pagePath, "utf8");

const counts = {};
for (const m of messages) {
  const c = classify(m);
  counts[c] = (counts[c] || 0) + 1;
}
const corpusUs = bench(() => {
  let s = "";
  for (const m of messages) s = classify(m);
  return s;
});
const pageUs = bench(() => classify(page));
console.log(`classes ${JSON.stringify(counts)}`);
console.log(`corpus ${messages.length} messages: ${corpusUs.toFixed(1)} µs/op`);
console.log(`page ${page.length} bytes: ${pageUs.toFixed(1)} µs/op`);
