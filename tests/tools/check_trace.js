#!/usr/bin/env node
// Check a Chrome trace-event JSON file (gpusample --format trace) against the
// Trace Event Format rules its readers rely on, and dump it for tests.
// Usage: check_trace.js FILE [--dump]
//   exit 0 + "VALID events=N threads=N dropped=N"; exit 1 + "INVALID ..." lines.
//   --dump prints "M pid tid what value", "S pid tid state ts dur category wait"
//   for state slices, "F pid tid depth name ts dur" for stack slices (depth
//   from the nesting the readers compute), "I pid tid name ts samples" and
//   "C pid name ts key=value ..." for counter points.
//   Flow events (ph "s" then "f" with "bp":"e", one id each: the waker
//   arrows) must come in pairs, the start no later than its end.
//   A process's step track (top-level "step" slices, "phase" slices nested in
//   them) prints as F lines too.
'use strict';
const fs = require('fs');
const file = process.argv[2];
if (!file) { console.error('usage: check_trace.js FILE [--dump]'); process.exit(2); }
let doc;
try { doc = JSON.parse(fs.readFileSync(file, 'utf8')); }
catch (e) { console.log('INVALID JSON: ' + e.message); process.exit(1); }
const errors = [];
if (!doc || !Array.isArray(doc.traceEvents)) { console.log('INVALID no traceEvents array'); process.exit(1); }
const byThread = new Map();
const out = [];
const flows = new Map(); // id -> { s, f } timestamps
doc.traceEvents.forEach((e, i) => {
  const where = `event ${i}`;
  if (!['X', 'M', 'i', 'C', 's', 'f'].includes(e.ph)) errors.push(`${where}: ph ${e.ph}`);
  if (!Number.isInteger(e.pid) || !Number.isInteger(e.tid)) errors.push(`${where}: pid/tid not integers`);
  if (typeof e.name !== 'string') errors.push(`${where}: name not a string`);
  if (e.ph === 'M') {
    if (!e.args || (e.args.name === undefined && e.args.sort_index === undefined))
      errors.push(`${where}: metadata without args.name/sort_index`);
    out.push(`M ${e.pid} ${e.tid} ${e.name} ${e.args.name !== undefined ? e.args.name : e.args.sort_index}`);
    return;
  }
  if (typeof e.ts !== 'number' || e.ts < 0) errors.push(`${where}: ts ${e.ts}`);
  if (e.ph === 'i') {
    if (!['t', 'p', 'g'].includes(e.s)) errors.push(`${where}: instant scope ${e.s}`);
    out.push(`I ${e.pid} ${e.tid} ${e.name} ${e.ts} ${e.args && e.args.samples}`);
    return;
  }
  if (e.ph === 's' || e.ph === 'f') {
    if (!Number.isInteger(e.id)) errors.push(`${where}: flow without an integer id`);
    if (e.ph === 'f' && e.bp !== 'e') errors.push(`${where}: flow end not bound to its enclosing slice (bp e)`);
    const fl = flows.get(e.id) || {};
    if (fl[e.ph] !== undefined) errors.push(`${where}: flow id ${e.id} has two "${e.ph}" events`);
    fl[e.ph] = e.ts;
    flows.set(e.id, fl);
    return;
  }
  if (e.ph === 'C') {
    // Readers make one track per (pid, name, arg key): the args are numbers.
    const keys = e.args && typeof e.args === 'object' ? Object.keys(e.args) : [];
    if (!keys.length || keys.some(k => typeof e.args[k] !== 'number' || !Number.isFinite(e.args[k])))
      errors.push(`${where}: counter args not all numbers`);
    out.push(`C ${e.pid} ${e.name} ${e.ts} ${keys.map(k => `${k}=${e.args[k]}`).join(' ')}`);
    return;
  }
  if (typeof e.dur !== 'number' || e.dur < 0) errors.push(`${where}: dur ${e.dur}`);
  const k = `${e.pid} ${e.tid}`;
  if (!byThread.has(k)) byThread.set(k, []);
  byThread.get(k).push({ e, i });
});
for (const [id, fl] of flows) {
  if (fl.s === undefined || fl.f === undefined) errors.push(`flow id ${id}: only its "${fl.s === undefined ? 'f' : 's'}" event`);
  else if (fl.s > fl.f) errors.push(`flow id ${id}: starts at ${fl.s} after its end at ${fl.f}`);
}
// Readers sort by ts (stable: equal ts keep file order, parent first) and
// nest by containment; a slice that overlaps its parent's end is an error.
// Ends are ts + dur added in doubles, exactly as the readers add them: no
// tolerance, since one ulp past the parent's end is enough for speedscope
// to mis-nest the stack.
const eps = 0;
for (const [k, list] of byThread) {
  list.sort((a, b) => a.e.ts - b.e.ts || a.i - b.i);
  const open = [];
  for (const { e } of list) {
    while (open.length && open[open.length - 1].ts + open[open.length - 1].dur <= e.ts + eps)
      open.pop();
    const parent = open[open.length - 1];
    if (parent && e.ts + e.dur > parent.ts + parent.dur + eps)
      errors.push(`thread ${k}: "${e.name}" at ${e.ts} (dur ${e.dur}) overlaps the end of "${parent.name}" at ${parent.ts} (dur ${parent.dur})`);
    // a process's step track: top-level "step" slices, phases nested in them
    if (!parent && e.cat !== 'state' && e.cat !== 'step') errors.push(`thread ${k}: stack slice "${e.name}" at ${e.ts} outside a state slice`);
    if (parent && (e.cat === 'state' || e.cat === 'step')) errors.push(`thread ${k}: ${e.cat} slice at ${e.ts} nested in "${parent.name}"`);
    if (e.cat === 'phase' && (!parent || parent.cat !== 'step')) errors.push(`thread ${k}: phase slice at ${e.ts} outside a step`);
    if (e.cat === 'state')
      out.push(`S ${k} ${e.name} ${e.ts} ${e.dur} ${e.args && e.args.category}${e.args && e.args.wait ? ' ' + e.args.wait : ''}`);
    else
      out.push(`F ${k} ${open.length} ${e.name} ${e.ts} ${e.dur}`);
    open.push(e);
  }
}
if (errors.length) { errors.slice(0, 20).forEach(e => console.log('INVALID ' + e)); process.exit(1); }
const od = doc.otherData || {};
console.log(`VALID events=${doc.traceEvents.length} threads=${byThread.size} dropped=${od.dropped_events}`);
if (od.note) console.log(`NOTE ${od.note}`);
if (process.argv.includes('--dump')) out.forEach(l => console.log(l));
