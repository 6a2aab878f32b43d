#!/usr/bin/env node
// Validate a speedscope JSON file against the schema shipped in the npm
// speedscope package (tests/node_modules, `cd tests && npm install
// speedscope@1.25.0 ajv@8`), plus what the schema cannot express: frame
// indices in range, samples.length == weights.length, evented open/close
// balance.  Usage: validate_speedscope.js FILE [--dump]
//   exit 0 + "VALID ..." summary; exit 1 + errors otherwise.
//   --dump also prints every sample as "P<i>\troot;...;leaf\tweight".
'use strict';
const fs = require('fs');
const path = require('path');
const mods = path.join(__dirname, '..', 'node_modules');
if (!fs.existsSync(path.join(mods, 'ajv')) || !fs.existsSync(path.join(mods, 'speedscope'))) {
  console.error(`validate_speedscope: ${mods} lacks ajv or speedscope: run make test-deps ` +
                '(it installs them with npm)');
  process.exit(2);
}
const Ajv = require(path.join(mods, 'ajv'));
const schema = JSON.parse(fs.readFileSync(
  path.join(mods, 'speedscope', 'dist', 'release', 'file-format-schema.json'), 'utf8'));

const file = process.argv[2];
if (!file) { console.error('usage: validate_speedscope.js FILE [--dump]'); process.exit(2); }
let doc;
try { doc = JSON.parse(fs.readFileSync(file, 'utf8')); }
catch (e) { console.log('INVALID JSON: ' + e.message); process.exit(1); }

const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
const errors = [];
if (!validate(doc)) errors.push('schema: ' + JSON.stringify(validate.errors));
const nf = (doc.shared && doc.shared.frames || []).length;
(doc.profiles || []).forEach((p, i) => {
  if (p.type === 'sampled') {
    if (p.samples.length !== p.weights.length)
      errors.push(`profile ${i}: samples.length ${p.samples.length} != weights.length ${p.weights.length}`);
    p.samples.forEach((s, j) => s.forEach(f => {
      if (!Number.isInteger(f) || f < 0 || f >= nf) errors.push(`profile ${i} sample ${j}: frame ${f} out of range`);
    }));
    const total = p.weights.reduce((a, b) => a + b, 0);
    if (total !== p.endValue - p.startValue)
      errors.push(`profile ${i}: weights sum ${total} != endValue-startValue ${p.endValue - p.startValue}`);
  } else if (p.type === 'evented') {
    const open = []; let last = -Infinity;
    p.events.forEach(e => {
      if (e.at < last) errors.push(`profile ${i}: events not sorted`);
      last = e.at;
      if (e.frame < 0 || e.frame >= nf) errors.push(`profile ${i}: frame ${e.frame} out of range`);
      if (e.type === 'O') open.push(e.frame);
      else if (open.pop() !== e.frame) errors.push(`profile ${i}: unbalanced close of ${e.frame}`);
    });
    if (open.length) errors.push(`profile ${i}: ${open.length} frames left open`);
  }
});
if (doc.activeProfileIndex !== undefined &&
    (doc.activeProfileIndex < 0 || doc.activeProfileIndex >= (doc.profiles || []).length))
  errors.push('activeProfileIndex out of range');
if (errors.length) { errors.slice(0, 20).forEach(e => console.log('INVALID ' + e)); process.exit(1); }

console.log(`VALID frames=${nf} profiles=${doc.profiles.length} active=${doc.activeProfileIndex}`);
doc.profiles.forEach((p, i) => {
  const total = p.type === 'sampled' ? p.weights.reduce((a, b) => a + b, 0) : p.endValue - p.startValue;
  const n = p.type === 'sampled' ? p.samples.length : p.events.length;
  console.log(`PROFILE ${i}\t${p.name}\t${p.unit}\tsamples=${n}\ttotal=${total}`);
});
if (process.argv.includes('--dump')) {
  const names = doc.shared.frames.map(f => f.name);
  doc.profiles.forEach((p, i) => {
    if (p.type !== 'sampled') return;
    p.samples.forEach((s, j) => console.log(`P${i}\t${s.map(f => names[f]).join(';')}\t${p.weights[j]}`));
  });
}
