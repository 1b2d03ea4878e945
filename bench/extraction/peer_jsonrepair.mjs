// npm jsonrepair's side of the extraction benchmark (run by ../extraction.py).
//
//   node peer_jsonrepair.mjs outputs CORPUS.jsonl OUT
//   node peer_jsonrepair.mjs time CORPUS.jsonl [MIN_SECS]
//
// Each case is `JSON.parse(jsonrepair(input))`; a throw from either is a failure. The
// outputs file keeps jsonrepair's own text (checked by JSON.parse), so `2.0` stays `2.0`.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(new URL("../node/package.json", import.meta.url));
const { jsonrepair } = require("jsonrepair");

const load = (path) =>
  readFileSync(path, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

function outputs(corpus, out) {
  const lines = load(corpus).map((c) => {
    try {
      const text = jsonrepair(c.input);
      JSON.parse(text);
      return JSON.stringify({ ok: true, json: text });
    } catch {
      return JSON.stringify({ ok: false });
    }
  });
  writeFileSync(out, lines.join("\n") + "\n");
}

let sink = 0;
function onePass(inputs) {
  for (const s of inputs) {
    try {
      const v = JSON.parse(jsonrepair(s));
      if (v === sink) sink++;
    } catch {
      sink--;
    }
  }
}

// Warm up for 0.5 s, then whole-file passes until minSecs have passed.
function timed(corpus, minSecs) {
  const inputs = load(corpus).map((c) => c.input);
  const bytes = inputs.reduce((n, s) => n + Buffer.byteLength(s, "utf8"), 0);
  const now = () => Number(process.hrtime.bigint()) / 1e9;
  let t0 = now();
  while (now() - t0 < 0.5) onePass(inputs);
  let reps = 0;
  t0 = now();
  while (reps === 0 || now() - t0 < minSecs) {
    onePass(inputs);
    reps++;
  }
  const secs = now() - t0;
  console.log(JSON.stringify({ cases: inputs.length, bytes, reps, secs, sink: sink === 0.5 }));
}

const [mode, corpus, arg] = process.argv.slice(2);
if (mode === "outputs") outputs(corpus, arg);
else if (mode === "time") timed(corpus, arg ? Number(arg) : 1.0);
else {
  console.error("usage: peer_jsonrepair.mjs outputs CORPUS OUT | time CORPUS [MIN_SECS]");
  process.exit(2);
}
