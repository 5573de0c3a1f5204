// Baseline for bench/run: streams an X12 file through npm x12-parser 1.3.0
// (its X12parser Transform stream) and consumes every segment, touching
// each element, then prints the segment and element counts.
// Usage: node bench/x12parser.cjs NPM_PREFIX FILE
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { createRequire } = require('node:module');
const { pipeline } = require('node:stream/promises');

const [prefix, file] = process.argv.slice(2);
// Resolve the package as code in NPM_PREFIX would (through its "exports").
const { X12parser } = createRequire(path.join(path.resolve(prefix), 'bench.js'))('x12-parser');

let segments = 0;
let elements = 0;
let bytes = 0;
const parser = new X12parser();
parser.on('data', (seg) => {
  segments++;
  for (const k in seg) {
    if (k !== 'name') {
      elements++;
      bytes += seg[k].length;
    }
  }
});
pipeline(fs.createReadStream(file), parser).then(
  () => console.log(JSON.stringify({ segments, elements, bytes })),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
