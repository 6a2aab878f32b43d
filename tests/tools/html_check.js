#!/usr/bin/env node
// SPDX-License-Identifier: MIT
// Open one of gpusample's HTML reports in headless Chromium with the
// network off and drive it through the DevTools protocol (over
// --remote-debugging-pipe: no npm package needed):
//
//   node tests/tools/html_check.js PAGE.html [--frame NAME] [--thread NAME]
//        [--hostile TEXT] [--screenshot OUT.png [--shot-height PX]]
//        [--max-open-ms N] [--dump]
//
// Checks: the report's first section is "Where the time goes" and the
// verdict follows it (--dump: a dump's page, which has no time, starts with
// its threads' stacks); the flame graph draws frames (NAME among them, all threads); search for NAME
// highlights frames and gives their share; a click on a NAME frame zooms
// it to the full width and "reset zoom" undoes it; the thread filter (the
// first thread named NAME, else the second thread) changes the graph's
// total; a tooltip gives total, self and file:line; every view (wall, CPU,
// GPU samples) draws, the GPU one with "[GPU] kernel" frames; no request leaves the page (only the page itself is loaded), no
// script error, no dialog; with --hostile, TEXT is on the page as text and
// no element came from it.  Prints "open_ms N" (navigation start to the
// graph drawn) and one "ok"/"FAIL" line per check; exit 0 when all pass, 1
// otherwise, 77 when Chromium is missing.
'use strict';
const { spawn, execSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const args = process.argv.slice(2);
process.stdout.on('error', () => {}); // a closed pipe (| head) must not leave Chromium behind
const page = args[0];
function opt(name) {
  const i = args.indexOf(name);
  return i > 0 ? args[i + 1] : undefined;
}
if (!page) {
  console.error('usage: html_check.js PAGE.html [--frame NAME] [--thread NAME] [--hostile TEXT] ' +
    '[--screenshot OUT.png] [--max-open-ms N]');
  process.exit(2);
}
let chrome = null;
for (const c of ['chromium', 'chromium-browser', 'google-chrome']) {
  try {
    chrome = execSync('command -v ' + c, { encoding: 'utf8', shell: '/bin/sh' }).trim();
    if (chrome) break;
  } catch (e) { /* next */ }
}
if (!chrome) {
  console.log('html_check: chromium not installed (apt-get install chromium)');
  process.exit(77);
}
const url = 'file://' + path.resolve(page);
const frameName = opt('--frame');
const threadName = opt('--thread');
const hostile = opt('--hostile');
const shot = opt('--screenshot');
const maxOpen = +(opt('--max-open-ms') || 0);

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'gs-html-check-'));
// Network off: every host resolves to nothing and any proxy is a dead port.
const proc = spawn(chrome, ['--headless', '--no-sandbox', '--disable-gpu', '--remote-debugging-pipe',
  '--user-data-dir=' + profile, '--no-first-run', '--no-default-browser-check',
  '--disable-background-networking', '--disable-extensions', '--disable-sync',
  '--disable-component-update', '--proxy-server=127.0.0.1:9', '--host-resolver-rules=MAP * ~NOTFOUND',
  '--window-size=1400,900', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
proc.stderr.on('data', () => {});

let nextId = 1, buf = '';
const pending = new Map(), listeners = [];
proc.stdio[4].on('data', (d) => {
  buf += d.toString('utf8');
  let z;
  while ((z = buf.indexOf('\0')) >= 0) {
    const msg = JSON.parse(buf.slice(0, z));
    buf = buf.slice(z + 1);
    if (msg.id && pending.has(msg.id)) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(p.method + ': ' + msg.error.message));
      else p.resolve(msg.result);
    } else if (msg.method) {
      listeners.forEach((l) => l(msg));
    }
  }
});
function send(method, params, sessionId) {
  const id = nextId++;
  const m = { id, method, params: params || {} };
  if (sessionId) m.sessionId = sessionId;
  proc.stdio[3].write(JSON.stringify(m) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

let failed = 0;
function check(ok, what, detail) {
  console.log((ok ? 'ok: ' : 'FAIL: ') + what + (detail !== undefined ? ' (' + detail + ')' : ''));
  if (!ok) failed++;
}

const requests = [], errors = [], dialogs = [];
let s = null, openMs = 0;
async function js(expr) {
  const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true }, s);
  if (r.exceptionDetails) throw new Error('in page: ' + expr + ': ' + r.exceptionDetails.text);
  return r.result.value;
}

async function main() {
  listeners.push((m) => {
    if (m.method === 'Network.requestWillBeSent') requests.push(m.params.request.url);
    if (m.method === 'Runtime.exceptionThrown') errors.push(m.params.exceptionDetails.text +
      ' ' + JSON.stringify(m.params.exceptionDetails.exception || {}).slice(0, 200));
    if (m.method === 'Page.javascriptDialogOpening') {
      // an alert() from a name run as markup: record it, close it (it blocks the page)
      dialogs.push(m.params.message);
      send('Page.handleJavaScriptDialog', { accept: true }, m.sessionId).catch(() => {});
    }
  });
  const { targetInfos } = await send('Target.getTargets');
  const target = targetInfos.find((t) => t.type === 'page');
  s = (await send('Target.attachToTarget', { targetId: target.targetId, flatten: true })).sessionId;
  await send('Network.enable', {}, s);
  await send('Page.enable', {}, s);
  await send('Runtime.enable', {}, s);
  await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: 900, deviceScaleFactor: 1, mobile: false }, s);
  const loaded = new Promise((r) => listeners.push((m) => { if (m.method === 'Page.loadEventFired') r(); }));
  await send('Page.navigate', { url }, s);
  await loaded;
  // the graph is drawn by the page's script at load: wait for it
  let drawn = 0;
  for (let i = 0; i < 100 && !drawn; i++) {
    drawn = await js("document.querySelectorAll('#fg-graph .f').length");
    if (!drawn) await sleep(50);
  }
  openMs = await js('Math.round(performance.now())');
  console.log('open_ms ' + openMs);
  if (maxOpen) check(openMs <= maxOpen, 'opens within ' + maxOpen + ' ms', openMs + ' ms');

  // as it opens, before the checks below change it
  if (shot) {
    const h = await js('Math.min(document.documentElement.scrollHeight, ' + (+(opt('--shot-height') || 6000)) + ')');
    await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: h, deviceScaleFactor: 1, mobile: false }, s);
    await sleep(100);
    const img = await send('Page.captureScreenshot', { format: 'png' }, s);
    fs.writeFileSync(shot, Buffer.from(img.data, 'base64'));
    console.log('screenshot ' + shot);
  }
  await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: 900, deviceScaleFactor: 1, mobile: false }, s);
  const first = await js("(function(){var h=Array.from(document.querySelectorAll('main section h2'))" +
    ".map(function(e){return e.textContent});return [h[0],h[1]]})()");
  if (args.indexOf('--dump') < 0) {
    check(first[0] === 'Where the time goes', 'the report starts with "Where the time goes"', first[0]);
    check(/^Verdict: /.test(first[1] || ''), 'the verdict follows it', first[1]);
  } else {
    // its threads by their place in the job's own Python code (when they have
    // Python frames), else the functions they are stopped in
    check(/^(Threads by their innermost frame|Top functions by threads stopped)/.test(first[0]),
      'a dump starts with its threads\' places', first[0]);
  }
  check(drawn > 3, 'the flame graph draws frames', drawn);

  try {
    await interact();
  } catch (e) {
    check(false, 'driving the page', e.message); // the checks after this still run
  }
  await afterwards();
}

// Search, zoom, tooltip, views and the thread filter.
async function interact() {
  // the graph opens on the main thread when there is one; the checks below
  // start from all threads
  const dflt = await js("(function(){var s=document.getElementById('fg-filter');" +
    "return s.options[s.selectedIndex].textContent})()");
  console.log('default filter: ' + dflt);
  await js("(function(){var s=document.getElementById('fg-filter');s.value='all';s.dispatchEvent(new Event('change'))})()");
  const names = await js("Array.from(document.querySelectorAll('#fg-graph .f')).map(function(e){return e.textContent})");
  if (frameName) {
    check(names.some((t) => t.indexOf(frameName) >= 0), 'a frame named ' + frameName + ' is drawn');
    // search
    await js("(function(){var i=document.getElementById('fg-search');i.value=" + JSON.stringify(frameName) +
      ";i.dispatchEvent(new Event('input'))})()");
    const hits = await js("document.querySelectorAll('#fg-graph .f.m').length");
    const st = await js("document.getElementById('fg-status').textContent");
    const share = /search: (\d+) frames match, .* \(([\d.]+)%\)/.exec(st);
    check(hits > 0 && share && +share[2] > 0, 'search highlights ' + frameName + ' with its share',
      hits + ' highlighted; ' + st);
    const allMatch = await js("Array.from(document.querySelectorAll('#fg-graph .f.m')).every(function(e){" +
      'return e.textContent.toLowerCase().indexOf(' + JSON.stringify(frameName.toLowerCase()) + ')>=0})');
    check(allMatch, 'only matching frames are highlighted');
    // zoom: click the widest NAME frame
    const z = await js("(function(){var g=document.getElementById('fg-graph'),best=null;" +
      "document.querySelectorAll('#fg-graph .f.m').forEach(function(e){if(!best||e.offsetWidth>best.offsetWidth)best=e});" +
      "var n=best.getAttribute('data-n'),w0=best.offsetWidth;" +
      "best.dispatchEvent(new MouseEvent('click',{bubbles:true}));" +
      "var now=g.querySelector('[data-n=\"'+n+'\"]');" +
      "return [w0,now?now.offsetWidth:-1,g.clientWidth,document.getElementById('fg-status').textContent]})()");
    check(z[1] >= z[2] - 2 && z[1] > z[0] - 1, 'a click zooms the frame to the full width',
      'width ' + z[0] + ' -> ' + z[1] + ' of ' + z[2] + '; ' + z[3]);
    check(/zoomed to/.test(z[3]), 'the status line names the zoomed frame');
    const back = await js("(function(){document.getElementById('fg-reset').click();" +
      "return document.getElementById('fg-status').textContent})()");
    check(!/zoomed to/.test(back), 'reset zoom goes back to all');
    await js("(function(){var i=document.getElementById('fg-search');i.value='';i.dispatchEvent(new Event('input'))})()");
  }
  // tooltip: self / total and file:line of the widest frame with a file
  const tipText = await js("(function(){var best=null,D=JSON.parse(document.getElementById('gs-data').textContent);" +
    "document.querySelectorAll('#fg-graph .f').forEach(function(e){var n=+e.getAttribute('data-n');" +
    "if(n>0&&D.frames[D.nodes[2*n-1]][3]>0&&(!best||e.offsetWidth>best.offsetWidth))best=e});" +
    "if(!best)return null;var r=best.getBoundingClientRect();" +
    "best.dispatchEvent(new MouseEvent('mousemove',{bubbles:true,clientX:r.left+2,clientY:r.top+2}));" +
    "var t=document.getElementById('fg-tip');return t.style.display==='block'?t.textContent:''})()");
  check(tipText && /total .*\n.*self .*\n.*:\d+/.test(tipText), 'a tooltip gives total, self and file:line',
    tipText && tipText.replace(/\n/g, ' | '));
  // every view draws; the GPU view has [GPU] kernel frames
  const vs = await js("(function(){var s=document.getElementById('fg-view'),out=[];" +
    "Array.from(s.options).forEach(function(o){s.value=o.value;s.dispatchEvent(new Event('change'));" +
    "var f=Array.from(document.querySelectorAll('#fg-graph .f')).map(function(e){return e.textContent});" +
    "out.push([o.textContent,f.length,f.some(function(t){return t.indexOf('[GPU] ')===0})])});" +
    "s.value=s.options[0].value;s.dispatchEvent(new Event('change'));return out})()");
  vs.forEach((v) => check(v[1] > 1 && (v[0] !== 'GPU samples' || v[2]), 'the ' + v[0] + ' view draws' +
    (v[0] === 'GPU samples' ? ' [GPU] kernel frames' : ''), v[1] + ' frames'));
  // thread filter
  const f = await js("(function(){var s=document.getElementById('fg-filter'),want=" + JSON.stringify(threadName || '') +
    ",o=Array.from(s.options).filter(function(o){return o.value.charAt(0)==='t'});" +
    "var pick=o.find(function(x){return want&&x.textContent.indexOf(want)>=0})||o[1];" +
    "if(!pick)return null;var before=document.getElementById('fg-status').textContent;" +
    "s.value=pick.value;s.dispatchEvent(new Event('change'));" +
    "return [pick.textContent,before,document.getElementById('fg-status').textContent," +
    "document.querySelectorAll('#fg-graph .f').length]})()");
  check(f && f[1].split(' in view')[0] !== f[2].split(' in view')[0] && f[3] > 0,
    'the thread filter redraws the graph for one thread', f && (f[0] + ': ' + f[1].split(';')[0] + ' -> ' + f[2].split(';')[0]));
  await js("(function(){var s=document.getElementById('fg-filter');s.value='all';s.dispatchEvent(new Event('change'))})()");
}

// Hostile names, script errors, dialogs, requests.
async function afterwards() {
  if (hostile) {
    const h = await js('(function(){var t=' + JSON.stringify(hostile) + ';return [document.images.length,' +
      "document.querySelectorAll('[onerror]').length,document.body.textContent.indexOf(t)>=0," +
      "!!document.getElementById('fg-filter')&&Array.from(document.getElementById('fg-filter').options)" +
      '.some(function(o){return o.textContent.indexOf(t)>=0})]})()');
    check(h[0] === 0 && h[1] === 0, 'no element came from a hostile name', h[0] + ' images, ' + h[1] + ' onerror');
    check(h[2], 'the hostile name is shown as text');
    if (threadName === hostile) check(h[3], 'the hostile thread name is shown as text in the filter');
  }
  check(errors.length === 0, 'no script error', errors.join('; '));
  check(dialogs.length === 0, 'no dialog', dialogs.join('; '));
  const away = requests.filter((r) => r !== url);
  check(away.length === 0, 'no request leaves the page', away.length ? away.join(' ') : requests.length + ' request(s), all the page');
}

const exited = new Promise((r) => proc.on('exit', r));
const timer = setTimeout(() => { console.log('FAIL: timed out'); finish(1); }, 60000);
// Browser.close, then the profile directory (Chromium's helpers write into
// it until they are gone).
async function finish(rc) {
  clearTimeout(timer);
  await Promise.race([send('Browser.close').catch(() => {}), sleep(3000)]);
  await Promise.race([exited, sleep(5000)]);
  try { proc.kill('SIGKILL'); } catch (e) { /* gone */ }
  try {
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch (e) {
    console.log('html_check: left ' + profile + ': ' + e.message);
  }
  process.exit(rc);
}
main().then(() => finish(failed ? 1 : 0), (e) => { console.log('FAIL: ' + e.message); finish(1); });
