// webui.mjs — the web UI `cinfer serve` serves at /, in headless Debian
// Chromium (/usr/bin/chromium, or $CHROMIUM) driven by playwright-core.
//
// Checks: the page loads (HTML, no API key needed for the page itself) with
// its controls (#prompt #send #messages #model #stats #schema-toggle #schema
// #stop #api-key); the model list names the served model; a message sent
// with the API key streams (an SSE response, and #messages grows in several
// steps); a model with chat:false is listed disabled; an error answer shows its message; the stats line fills in; the seed field shows its whole placeholder; with the schema toggle on, the request
// carries response_format json_schema and the streamed answer parses and
// validates.  A screenshot is kept at $CINFER_BUILD/serve-artifacts/webui.png
// (path printed).  No page errors.
//
// Usage: CINFER_BIN=build/cinfer node tests/serve/webui.mjs   (exit 0 = all passed)
import { existsSync } from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import {
  MODEL_NAME, API_KEY, startServer, check, assert, finish, hardTimeout, validate, parseJSON, parseSSE, onCleanup, artifactDir, short,
} from './lib.mjs';

hardTimeout(90, 'webui.mjs');

const exe = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(exe)) { console.log(`FAIL - chromium not found at ${exe}`); process.exit(1); }

const srv = await startServer().catch((e) => { console.log(`FAIL - start server: ${e.message}`); process.exit(1); });
// The flags the machine notes give for a closed network: no background
// connections, no sandbox (root), no GPU.
const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
onCleanup(() => browser.close());
const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
// Tee every streamed /v1/ fetch() answer (decoded as UTF-8) into window.__sse.
await page.addInitScript(() => {
  const orig = window.fetch;
  window.__sse = [];
  window.fetch = async (...a) => {
    const r = await orig(...a);
    if (/\/v1\//.test(r.url) && /event-stream/.test(r.headers.get('content-type') || '')) {
      r.clone().text().then((t) => window.__sse.push(t), () => {});
    }
    return r;
  };
});
// Uncaught exceptions and the page's own console.error calls; the browser's
// "Failed to load resource" lines are network, judged by status below (a 401
// before the key is entered, or the /favicon.ico probe, is no page error).
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
page.on('console', (m) => {
  if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) pageErrors.push(`console: ${m.text()}`);
});
page.on('response', (r) => { if (r.status() >= 500) pageErrors.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`); });
page.on('requestfailed', (r) => {
  // a streaming request the page cancels itself (Stop) is not an error
  if (!/ERR_ABORTED/.test(r.failure()?.errorText || '')) pageErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
});
const shot = path.join(artifactDir(), 'webui.png');

const IDS = ['#prompt', '#send', '#messages', '#model', '#stats', '#schema-toggle', '#schema', '#stop', '#api-key'];
let loaded = false;

await check('GET / serves the UI as HTML with every control', async () => {
  const resp = await page.goto(srv.base + '/', { waitUntil: 'load', timeout: 15000 });
  assert(resp && resp.status() === 200, `status ${resp?.status()}`);
  assert(/text\/html/.test(resp.headers()['content-type'] || ''), `content-type ${resp.headers()['content-type']}`);
  const missing = [];
  for (const id of IDS) if ((await page.locator(id).count()) !== 1) missing.push(id);
  assert(!missing.length, `missing ${missing.join(' ')}`);
  loaded = true;
});

await check('#model lists the served model', async () => {
  assert(loaded, 'page did not load');
  await page.fill('#api-key', API_KEY);
  await page.locator('#api-key').dispatchEvent('change');
  await page.waitForFunction((name) => (document.querySelector('#model')?.textContent || '').includes(name)
    || [...(document.querySelector('#model')?.options || [])].some((o) => o.value === name || o.text.includes(name)), MODEL_NAME, { timeout: 10000 });
  if (await page.locator('#model').evaluate((e) => e.tagName === 'SELECT')) await page.selectOption('#model', { label: MODEL_NAME }).catch(() => page.selectOption('#model', MODEL_NAME));
});

await check('#model: a model without a chat template (/v1/models chat:false) is shown disabled, not selected', async () => {
  assert(loaded, 'page did not load');
  // the served list plus a completion-only model first (the server here has one model)
  await page.route('**/v1/models', async (route) => {
    const real = await route.fetch();
    const j = await real.json();
    j.data.unshift({ ...j.data[0], id: 'tiny-nochat', chat: false });
    await route.fulfill({ response: real, json: j });
  });
  try {
    await page.locator('#api-key').dispatchEvent('change');
    await page.waitForFunction(() => [...document.querySelector('#model').options].some((o) => o.value === 'tiny-nochat'), null, { timeout: 10000 });
    const st = await page.locator('#model').evaluate((e) => ({
      value: e.value, opts: [...e.options].map((o) => ({ v: o.value, d: o.disabled, t: o.text })),
    }));
    const nochat = st.opts.find((o) => o.v === 'tiny-nochat'), served = st.opts.find((o) => o.v === MODEL_NAME);
    assert(nochat.d && /no chat template/.test(nochat.t), `tiny-nochat option ${JSON.stringify(nochat)}`);
    assert(served && !served.d, `served option ${JSON.stringify(served)}`);
    assert(st.value === MODEL_NAME, `selected '${st.value}'`);
  } finally {
    await page.unroute('**/v1/models');
    await page.locator('#api-key').dispatchEvent('change');
    await page.waitForFunction(() => ![...document.querySelector('#model').options].some((o) => o.value === 'tiny-nochat'), null, { timeout: 10000 });
  }
});

/** Send prompt through the UI; resolve with {request, body (SSE text), growth (distinct #messages lengths)}. */
async function sendAndWatch(prompt) {
  await page.evaluate(() => {
    const m = document.querySelector('#messages');
    window.__lens = [m.innerText.length];
    window.__obs?.disconnect();
    window.__obs = new MutationObserver(() => {
      const n = m.innerText.length;
      if (n !== window.__lens[window.__lens.length - 1]) window.__lens.push(n);
    });
    window.__obs.observe(m, { subtree: true, childList: true, characterData: true });
  });
  const n0 = await page.evaluate(() => window.__sse.length);
  const respP = page.waitForResponse((r) => r.request().method() === 'POST' && /\/v1\//.test(r.url()), { timeout: 15000 });
  await page.fill('#prompt', prompt);
  await page.click('#send');
  const resp = await respP;
  await resp.finished(); // the stream has ended
  // SSE is UTF-8 by definition, but Chromium hands back a body whose
  // Content-Type names no charset as windows-1252 text; so take the bytes the
  // page's own fetch() saw (a tee made by the init script), else Playwright's.
  const teed = await page.waitForFunction((k) => window.__sse.length > k && window.__sse[k], n0, { timeout: 5000 })
    .then((h) => h.jsonValue()).catch(() => null);
  const body = teed ?? (await resp.body()).toString('utf8');
  await page.waitForTimeout(300); // let the last delta render
  const lens = await page.evaluate(() => { window.__obs.disconnect(); return window.__lens; });
  return { resp, request: resp.request(), body, lens };
}

/** The assistant text carried by an OpenAI or Anthropic SSE body. */
function streamedText(body) {
  let text = '';
  for (const e of parseSSE(body)) {
    if (!e.data || e.data === '[DONE]') continue;
    const d = parseJSON(e.data, 'SSE data');
    text += d.choices?.[0]?.delta?.content || d.choices?.[0]?.text || (d.type === 'content_block_delta' ? d.delta?.text || '' : '') || (d.type === 'response.output_text.delta' ? d.delta : '');
  }
  return text;
}

let first = null;
await check('send a message: the answer streams (SSE) into #messages in several steps', async () => {
  assert(loaded, 'page did not load');
  first = await sendAndWatch('Tell me a short story about a robot.');
  assert(first.resp.status() === 200, `status ${first.resp.status()}: ${short(first.body)}`);
  assert(/text\/event-stream/.test(first.resp.headers()['content-type'] || ''), `content-type ${first.resp.headers()['content-type']} (not streamed)`);
  const sent = first.request.postDataJSON();
  assert(sent?.stream === true, `request ${short(sent)}`);
  const text = streamedText(first.body);
  assert(text.length > 0, 'the stream carried no text');
  const shown = await page.locator('#messages').innerText();
  assert(shown.includes('Tell me a short story about a robot.'), 'the user message is not shown');
  const probe = text.trim().slice(0, 12);
  assert(shown.replace(/\s+/g, ' ').includes(probe.replace(/\s+/g, ' ')), `streamed text '${probe}' not shown in #messages`);
  const grew = first.lens.filter((n, i) => i > 0 && n > first.lens[i - 1]).length;
  assert(grew >= 3, `#messages grew in ${grew} steps (${first.lens.join(',')}): not streamed`);
  return `${text.length} chars, ${grew} render steps`;
});

await check('#stats shows the finished generation', async () => {
  assert(first, 'no message sent');
  await page.waitForFunction(() => (document.querySelector('#stats')?.innerText || '').trim().length > 0, null, { timeout: 5000 });
  const s = await page.locator('#stats').innerText();
  assert(/\d/.test(s), `stats '${s}'`);
  return short(s.trim(), 80);
});

await check('#seed shows its whole "random" placeholder (room left for the spin buttons)', async () => {
  assert(loaded, 'page did not load');
  await page.click('#settings-toggle');
  const m = await page.evaluate(() => {
    const e = document.querySelector('#seed');
    const cs = getComputedStyle(e);
    const ctx = document.createElement('canvas').getContext('2d');
    ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
    const text = ctx.measureText(e.placeholder).width;
    const inner = e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    return { placeholder: e.placeholder, text, inner };
  });
  await page.click('#settings-toggle');
  // Chromium draws the number input's spin buttons (about 15 px) inside it
  assert(m.placeholder && m.text + 24 <= m.inner, `'${m.placeholder}' needs ${m.text.toFixed(1)} px + 24 px of spin buttons; the input has ${m.inner} px`);
  return `${m.text.toFixed(0)} px text in ${m.inner} px`;
});

await check('screenshot kept', async () => {
  await page.screenshot({ path: shot, fullPage: true });
  assert(existsSync(shot), 'no file');
  return shot;
});

await check('schema toggle: request carries response_format json_schema; the streamed answer validates', async () => {
  assert(loaded, 'page did not load');
  const schema = { type: 'object', properties: { title: { type: 'string', maxLength: 16 }, stars: { type: 'integer', minimum: 1, maximum: 5 } }, required: ['title', 'stars'], additionalProperties: false };
  const toggle = page.locator('#schema-toggle');
  const isBox = await toggle.evaluate((e) => e.tagName === 'INPUT' && (e.type === 'checkbox' || e.type === 'radio'));
  if (isBox) await toggle.check(); else await toggle.click();
  await page.locator('#schema').waitFor({ state: 'visible', timeout: 3000 });
  await page.fill('#schema', JSON.stringify(schema));
  const r = await sendAndWatch('Rate a movie.');
  const sent = r.request.postDataJSON();
  const rf = sent?.response_format;
  assert(rf?.type === 'json_schema' && rf.json_schema?.schema, `request response_format ${short(rf)}`);
  assert(r.resp.status() === 200, `status ${r.resp.status()}: ${short(r.body)}`);
  validate(schema, parseJSON(streamedText(r.body), 'streamed answer'), 'streamed answer');
  await page.screenshot({ path: path.join(artifactDir(), 'webui-schema.png'), fullPage: true });
});

await check('#stop cancels a streaming answer: its request is aborted, the server goes idle, #send is usable', async () => {
  assert(loaded, 'page did not load');
  const toggle = page.locator('#schema-toggle');
  if (await toggle.evaluate((e) => e.tagName === 'INPUT' && e.type === 'checkbox')) await toggle.uncheck();
  let why = null, attempts = 0;
  const failures = [];
  page.on('requestfailed', (r) => { if (/\/v1\//.test(r.url())) failures.push(r.failure()?.errorText || 'failed'); });
  // A random-weight model sometimes ends its answer at once, or just before
  // the click lands: then try again.
  for (; attempts < 4 && !why; attempts++) {
    const prompt = `Write a very long story about the sea, part ${attempts + 1}.`;
    const respP = page.waitForResponse((r) => r.request().method() === 'POST' && /\/v1\//.test(r.url()), { timeout: 10000 });
    await page.fill('#prompt', prompt);
    await page.click('#send');
    await page.waitForFunction((p) => document.querySelector('#messages').innerText.includes(p), prompt, { timeout: 5000 });
    const n0 = await page.evaluate(() => document.querySelector('#messages').innerText.length);
    const resp = await respP;
    const nFail = failures.length;
    const ended = resp.finished().then(() => 'ended', () => 'ended');
    // some answer has streamed in, and the stream is still going
    const grew = page.waitForFunction((n) => document.querySelector('#messages').innerText.length > n + 20, n0, { timeout: 10000 })
      .then(() => 'grew', () => 'no growth');
    if ((await Promise.race([ended, grew])) !== 'grew') { await grew; await ended; continue; }
    // (a click that cannot land, #stop disabled, means the answer just ended)
    if (!(await page.click('#stop', { timeout: 2000 }).then(() => true, () => false))) { await ended; continue; }
    await Promise.race([ended, new Promise((r) => setTimeout(r, 10000))]);
    await new Promise((r) => setTimeout(r, 200)); // the requestfailed event
    if (failures.length > nFail) why = failures[nFail];
  }
  assert(why && /ABORTED/i.test(why), `#stop clicked mid-stream in ${attempts} tries, the request was never aborted (${why})`);
  let h = null;
  for (let k = 0; k < 100; k++) { // the server stops that generation at its next token
    h = await fetch(srv.base + '/health').then((r) => r.json()).catch(() => null);
    if (h?.busy === 0 && h?.queued === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(h?.busy === 0 && h?.queued === 0, `server not idle after stop: ${short(h)}`);
  assert(await page.locator('#send').isEnabled(), '#send disabled after stop');
  return `${why}, attempt ${attempts}`;
});

await check('an error answer shows its message (the server\'s, not just the HTTP status)', async () => {
  assert(loaded, 'page did not load');
  const MSG = "model 'x' has no usable chat template; send a plain prompt to /v1/completions";
  await page.route('**/v1/chat/completions', (route) => route.fulfill({
    status: 400, contentType: 'application/json',
    body: JSON.stringify({ error: { message: MSG, type: 'invalid_request_error', param: 'model', code: null } }),
  }));
  try {
    await page.fill('#prompt', 'Hello?');
    await page.click('#send');
    const shown = await page.locator('.msg.error').last().innerText({ timeout: 10000 });
    assert(shown.includes(MSG) && shown.includes('400'), `shown: ${short(shown)}`);
  } finally {
    await page.unroute('**/v1/chat/completions');
    await page.fill('#prompt', '');
  }
});

await check('no JavaScript errors, no 5xx answers, no failed requests', async () => {
  assert(!pageErrors.length, pageErrors.slice(0, 3).join(' | '));
});

console.log(`screenshot: ${shot}`);
await finish('webui.mjs');
