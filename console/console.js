// Keygate operator console. Loaded as a file (the page's CSP is default-src 'self': no inline script).
// The management token lives in this module's memory only: never in storage, a cookie or a URL,
// so reloading the page signs out. Every value from the API is written with textContent, never as HTML.

let token = null;
let nextCursor = null;
// What the token may do (GET /v1/whoami): write buttons are drawn only when a write would be accepted.
let canWrite = false;
// The keys loaded so far (every page fetched), drawn in the order the operator picked.
let loaded = [];

const $ = (selector) => document.querySelector(selector);
const list = (text) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

// The API names a field by where it sits in the request ("body.allowIps: …"); the operator knows the form's words.
const FIELD_WORDS = {
  owner: 'Owner',
  label: 'Label',
  scopes: 'Scopes',
  allowIps: 'Allow-list',
  expiresAt: 'Expires',
  rateLimit: 'Rate limit',
  'rateLimit.rate': 'Rate limit',
  'rateLimit.burst': 'Burst',
  binding: 'Binding',
  graceSeconds: 'Grace period',
  reason: 'Reason',
  state: 'State',
  alg: 'Signing',
  publicKey: 'Public key',
  credits: 'Credits',
  'credits.remaining': 'Remaining',
  'credits.refill': 'Refill',
  'credits.refill.amount': 'Refill amount',
  'credits.refill.interval': 'Refill every',
  'credits.add': 'Add',
  add: 'Add',
};
function inFormWords(problem) {
  // A top-up's amount is named without the request's path ("credits.add: …").
  // An owner's settings are named from the owner ("owner.credits.remaining: …").
  const m = /^(?:body\.|query\.|key\.|owner\.|(?=credits\.))([A-Za-z.]+)(\[\d+\])?: (.*)$/.exec(problem);
  if (!m) return problem.replace(/^body: /, '');
  const words = FIELD_WORDS[m[1]] || FIELD_WORDS[m[1].split('.')[0]];
  return words ? `${words}: ${m[3]}` : problem;
}

class ApiError extends Error {
  constructor(status, body) {
    super(
      body && body.problems ? body.problems.map(inFormWords).join('; ') : (body && body.message) || `HTTP ${status}`,
    );
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit',
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : undefined;
  if (res.status === 401) signOut('The token was refused.');
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

function signOut(message) {
  token = null;
  $('#token').value = '';
  $('#keys').hidden = true;
  $('#sign-out').hidden = true;
  $('#sign-in').hidden = false;
  $('#who').textContent = '';
  $('#sign-in-error').textContent = message || '';
  $('#key-table tbody').replaceChildren();
  loaded = [];
  canWrite = false;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function when(iso) {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

function button(label, onClick, className) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  if (className) b.className = className;
  b.addEventListener('click', onClick);
  return b;
}

// Under the API key: how the client signs, HS256 (shared secret) or EdDSA/ES256 with the public key's
// fingerprint (sha256:… of its SPKI, as `keys show` prints it), shortened, whole in its tooltip, so an
// operator can tell which key pair a key holds. In the key's cell, not a column of its own: the table is full.
function algLine(key) {
  const line = document.createElement('small');
  line.className = 'alg';
  line.textContent = key.alg || 'HS256';
  if (key.publicKeyFingerprint) {
    const fp = document.createElement('span');
    fp.className = 'fingerprint';
    fp.title = key.publicKeyFingerprint;
    fp.textContent = ` ${key.publicKeyFingerprint.slice(0, 'sha256:'.length + 12)}…`;
    line.append(fp);
  }
  return line;
}

// Each owner's budget and what is left of it (GET /v1/owners/{owner}, issue 42): asked once per owner per load,
// shown on each of its keys, under the API key (every key of an owner spends from the one budget).
let budgets = new Map();
function budgetOf(owner) {
  if (!budgets.has(owner))
    budgets.set(
      owner,
      api('GET', `/v1/owners/${encodeURIComponent(owner)}`).catch(() => null),
    );
  return budgets.get(owner);
}
function budgetText(o) {
  if (!o) return '';
  if (!o.budget) return 'no owner budget';
  const b = o.budget;
  const limit = o.rateLimit
    ? `${o.rateLimit.rate}${o.rateLimit.burst ? ` burst ${o.rateLimit.burst}` : ''}`
    : `policy default, burst ${b.burst}`;
  return `budget ${limit}: ${b.remaining} of ${b.burst} left`;
}
function budgetLine(key) {
  const line = document.createElement('small');
  line.className = 'budget';
  budgetOf(key.owner).then((o) => {
    line.textContent = budgetText(o);
    if (o && o.budget) line.title = `whole again in ${o.budget.resetSeconds} s; shared by every key of ${key.owner}`;
  });
  return line;
}

// What is left of the key's credits, under the API key, when it has any (no line: unlimited).
function creditsLine(key) {
  const line = document.createElement('small');
  line.className = 'credits-left';
  line.textContent = `credits: ${key.credits.remaining} left`;
  if (key.credits.refill) line.title = `refilled to ${key.credits.refill.amount} every ${key.credits.refill.interval}`;
  return line;
}

// Regions: the key's home, the region whose Redis admits its tokens (its owner's home when it has an owner).
// Without regions the API sends no home, and no line is drawn.
function homeLine(key) {
  const line = document.createElement('small');
  line.className = 'home';
  line.title = 'the region whose Redis admits this key';
  line.textContent = `home ${key.home}`;
  return line;
}

function row(key) {
  const tr = document.createElement('tr');
  tr.dataset.apiKey = key.apiKey;
  const code = document.createElement('code');
  code.textContent = key.apiKey;
  const keyCell = document.createElement('td');
  keyCell.append(code, document.createElement('br'), algLine(key));
  if (key.owner) keyCell.append(document.createElement('br'), budgetLine(key));
  if (key.credits) keyCell.append(document.createElement('br'), creditsLine(key));
  if (key.home) keyCell.append(document.createElement('br'), homeLine(key));
  const state = document.createElement('span');
  state.className = `state ${key.status}`;
  state.textContent = key.status;
  const stateCell = document.createElement('td');
  stateCell.className = 'status';
  stateCell.append(state);
  const actions = document.createElement('td');
  actions.className = 'actions';
  if (canWrite && key.status !== 'revoked') {
    actions.append(button('Change', () => edit(key)));
    if (key.status === 'active') actions.append(button('Rotate', () => rotate(key)));
    actions.append(button('Credits', () => credits(key), 'credits'));
    actions.append(button('Revoke', () => revoke(key), 'danger'));
  }
  // A revoked key can still be deleted (the cleanup after a revoke); deleting asks for the key to be typed.
  if (canWrite) actions.append(button('Delete', () => remove(key)));
  // Any token may read the audit log (GET /v1/audit): who changed the key, how and when.
  actions.append(button('History', () => history(key), 'history'));
  // Any token may read usage: the key's requests by outcome, and its owner's, drawn as bar charts.
  actions.append(button('Usage', () => usage(key), 'usage'));
  tr.append(
    cell(key.owner || '', 'owner'),
    cell(key.label || '', 'label'),
    keyCell,
    cell(key.id || '', 'key-id'),
    cell(key.scopes.join(', ') || 'none', 'scopes'),
    cell(key.allowIps.join(', ') || 'any', 'allow-ips'),
    stateCell,
    cell(when(key.createdAt), 'created'),
    cell(when(key.expiresAt) || 'never', 'expires'),
    cell(when(key.lastUsedAt) || 'never', 'last-used'),
    actions,
  );
  return tr;
}

async function load(append) {
  $('#keys-error').textContent = '';
  const q = new URLSearchParams({ limit: '50' });
  const owner = $('#filter-owner').value.trim();
  const state = $('#filter-state').value;
  if (owner) q.set('owner', owner);
  if (state) q.set('state', state);
  if (append && nextCursor) q.set('cursor', nextCursor);
  if (!append) budgets = new Map();
  try {
    const page = await api('GET', `/v1/keys?${q}`);
    loaded = append ? loaded.concat(page.keys) : page.keys;
    draw();
    nextCursor = page.nextCursor;
    $('#more').hidden = nextCursor === null;
  } catch (err) {
    $('#keys-error').textContent = err.message;
  }
}

// The API pages by API key (a random string); the operator reads the keys newest first or by last use.
const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const ORDERS = {
  created: (a, b) => compare(b.createdAt, a.createdAt) || compare(a.apiKey, b.apiKey),
  'last-used': (a, b) => compare(b.lastUsedAt || '', a.lastUsedAt || '') || ORDERS.created(a, b),
  'api-key': (a, b) => compare(a.apiKey, b.apiKey),
};
function draw() {
  const order = ORDERS[$('#sort').value] || ORDERS.created;
  $('#key-table tbody').replaceChildren(...[...loaded].sort(order).map(row));
}

// After a create or rotate: an HS256 key's secret, shown this once; an EdDSA/ES256 key has none (the client
// holds its private key), so the dialog shows the fingerprint of the public key Keygate now holds instead.
function showSecret(title, key) {
  const secret = key.apiSecret;
  $('#secret-title').textContent = title;
  $('#secret-api-key').textContent = key.apiKey;
  $('#secret-value').textContent = secret || '';
  $('#secret-row').hidden = !secret;
  $('#fingerprint-row').hidden = Boolean(secret);
  $('#secret-fingerprint').textContent = secret ? '' : `${key.alg} ${key.publicKeyFingerprint || ''}`;
  $('#secret-intro').textContent = secret
    ? 'Copy the secret now: it is shown only once.'
    : 'The client signs with its own private key: Keygate holds only the public key, so there is no secret to copy.';
  $('#copy-secret').textContent = 'Copy';
  $('#secret-dialog').showModal();
}

function confirmAction(question, withReason) {
  const dialog = $('#confirm-dialog');
  dialog.querySelector('.question').textContent = question;
  dialog.querySelector('.reason').hidden = !withReason;
  dialog.querySelector('input[name=reason]').value = '';
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) =>
    dialog.addEventListener(
      'close',
      () => resolve(dialog.returnValue === 'yes' ? dialog.querySelector('input[name=reason]').value.trim() : null),
      { once: true },
    ),
  );
}

async function revoke(key) {
  const reason = await confirmAction(
    `Revoke ${key.apiKey}${key.owner ? ` (owner ${key.owner})` : ''}? Requests signed with it are refused at once.`,
    true,
  );
  if (reason === null) return;
  try {
    await api('POST', `/v1/keys/${encodeURIComponent(key.apiKey)}/revoke`, reason ? { reason } : {});
    await load(false);
  } catch (err) {
    $('#keys-error').textContent = err.message;
  }
}

let deleting = null;
// A key's audit entries, oldest first (every page of GET /v1/audit?apiKey=…); never a secret.
async function history(key) {
  const dialog = $('#history-dialog');
  dialog.querySelector('.which').textContent = key.apiKey;
  const body = dialog.querySelector('tbody');
  body.replaceChildren();
  dialog.querySelector('.error').textContent = '';
  dialog.showModal();
  try {
    let cursor = null;
    do {
      const q = new URLSearchParams({ apiKey: key.apiKey, limit: '1000' });
      if (cursor) q.set('cursor', cursor);
      const page = await api('GET', `/v1/audit?${q}`);
      for (const e of page.entries) {
        const why = [
          e.reason && `reason: ${e.reason}`,
          e.changes && `changed: ${e.changes.join(', ')}`,
          e.url && `found at: ${e.url}`,
          e.source && `source: ${e.source}`,
          e.detail,
        ].filter(Boolean);
        const tr = document.createElement('tr');
        tr.append(
          cell(when(e.at), 'at'),
          cell(e.action, 'action'),
          cell(e.actor, 'actor'),
          cell(why.join('; '), 'why'),
        );
        body.append(tr);
      }
      cursor = page.nextCursor;
    } while (cursor);
  } catch (err) {
    dialog.querySelector('.error').textContent = err.message;
  }
}

// Usage by outcome (GET /v1/keys/{apiKey}/usage?granularity=…, GET /v1/owners/{owner}/usage?…), drawn here as
// SVG built with DOM calls: nothing loaded from elsewhere, nothing the CSP would have to allow. The colours are
// SVG presentation attributes, not style attributes. Each bar is a stack of the bucket's outcomes.
const SVG_NS = 'http://www.w3.org/2000/svg';
const OUTCOME_COLOURS = {
  forwarded: '#2f855a',
  replay: '#dd6b20',
  rate_limited: '#d69e2e',
  credits_exhausted: '#6b46c1',
  other_refusals: '#c53030',
};
// The bars drawn: the newest buckets of the answer (the API answers 24 hours of minutes, 30 days of hours, a year of days).
const BARS = { minute: 60, hour: 48, day: 30 };
const SPAN_WORDS = { minute: 'the last hour', hour: 'the last 48 hours', day: 'the last 30 days' };
let usageOf = null;

function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function bucketLabel(iso, granularity) {
  if (granularity === 'day') return iso.slice(5, 10);
  return granularity === 'hour' ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
}

function usageChart(report) {
  const g = report.granularity;
  const buckets = report.buckets.slice(-BARS[g]);
  const [width, height, left, right, top, bottom] = [760, 200, 44, 10, 12, 28];
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const sums = buckets.map((b) => report.outcomes.reduce((n, o) => n + b[o], 0));
  const max = Math.max(1, ...sums);
  const chart = svgEl('svg', {
    class: 'usage-chart',
    viewBox: `0 0 ${width} ${height}`,
    role: 'img',
    'aria-label': `requests by outcome per ${g}, ${SPAN_WORDS[g]}`,
  });
  for (const v of [...new Set([0, Math.round(max / 2), max])]) {
    const y = top + plotH - (v / max) * plotH;
    chart.append(
      svgEl('line', { class: 'grid', x1: left, x2: width - right, y1: y, y2: y }),
      svgEl('text', { class: 'axis', x: left - 6, y: y + 4, 'text-anchor': 'end' }, String(v)),
    );
  }
  const slot = plotW / buckets.length;
  const barW = Math.max(1, slot * 0.75);
  buckets.forEach((b, i) => {
    const bar = svgEl('g', { class: 'bar', 'data-start': b.start, 'data-total': sums[i] });
    let y = top + plotH;
    for (const o of report.outcomes) {
      bar.setAttribute(`data-${o.replace(/_/g, '-')}`, b[o]);
      if (b[o] === 0) continue;
      const h = (b[o] / max) * plotH;
      y -= h;
      bar.append(
        svgEl('rect', {
          class: o,
          x: left + i * slot + (slot - barW) / 2,
          y,
          width: barW,
          height: h,
          fill: OUTCOME_COLOURS[o],
        }),
      );
    }
    const counts = report.outcomes.filter((o) => b[o] > 0).map((o) => `${o} ${b[o]}`);
    bar.append(svgEl('title', {}, `${when(b.start)}: ${counts.join(', ') || 'none'}`));
    chart.append(bar);
  });
  // The first label starts at its bar and the last ends at its bar, so neither runs off the chart.
  const last = buckets.length - 1;
  for (const i of [...new Set([0, Math.floor(buckets.length / 2), last])]) {
    const anchor = i === 0 ? 'start' : i === last ? 'end' : 'middle';
    const x = left + i * slot + (i === 0 ? 0 : i === last ? slot : slot / 2);
    const label = { class: 'axis', x, y: height - bottom + 16, 'text-anchor': anchor };
    chart.append(svgEl('text', label, bucketLabel(buckets[i].start, g)));
  }
  return { chart, buckets };
}

function usageLegend(report, buckets) {
  const legend = document.createElement('ul');
  legend.className = 'usage-legend';
  for (const o of report.outcomes) {
    const item = document.createElement('li');
    item.dataset.outcome = o;
    const swatch = svgEl('svg', { width: 10, height: 10, 'aria-hidden': 'true' });
    swatch.append(svgEl('rect', { width: 10, height: 10, fill: OUTCOME_COLOURS[o] }));
    item.append(swatch, `${o.replace(/_/g, ' ')}: ${buckets.reduce((n, b) => n + b[o], 0)}`);
    legend.append(item);
  }
  return legend;
}

// The credits left, when the record has any (`credits: { remaining, refill? }`); nothing when it has none (unlimited).
function creditsText(credits) {
  if (!credits || typeof credits.remaining !== 'number') return '';
  const refill = credits.refill ? `, refilled to ${credits.refill.amount} every ${credits.refill.interval}` : '';
  const next = credits.nextRefillAt ? ` (next ${when(credits.nextRefillAt)})` : '';
  return `credits left: ${credits.remaining}${refill}${next}`;
}

function usageSection(section, heading, report, record) {
  const h = document.createElement('h3');
  h.textContent = heading;
  const credits = document.createElement('p');
  credits.className = 'credits';
  credits.textContent = creditsText(record && record.credits);
  credits.hidden = credits.textContent === '';
  const { chart, buckets } = usageChart(report);
  section.replaceChildren(h, credits, chart, usageLegend(report, buckets));
}

async function drawUsage() {
  const dialog = $('#usage-dialog');
  const key = usageOf;
  const g = dialog.querySelector('select[name=granularity]').value;
  dialog.querySelector('.error').textContent = '';
  try {
    const q = new URLSearchParams({ granularity: g });
    const [report, record, ownerReport, owner] = await Promise.all([
      api('GET', `/v1/keys/${encodeURIComponent(key.apiKey)}/usage?${q}`),
      api('GET', `/v1/keys/${encodeURIComponent(key.apiKey)}`),
      key.owner ? api('GET', `/v1/owners/${encodeURIComponent(key.owner)}/usage?${q}`) : null,
      key.owner ? api('GET', `/v1/owners/${encodeURIComponent(key.owner)}`) : null,
    ]);
    if (usageOf !== key) return; // another key's dialog was opened meanwhile
    usageSection(
      dialog.querySelector('.usage-key'),
      `Key ${key.apiKey}: requests by outcome per ${g}, ${SPAN_WORDS[g]}`,
      report,
      record,
    );
    const ownerSection = dialog.querySelector('.usage-owner');
    if (ownerReport)
      usageSection(ownerSection, `Owner ${key.owner} (all its keys): per ${g}, ${SPAN_WORDS[g]}`, ownerReport, owner);
    else ownerSection.replaceChildren();
    dialog.dataset.drawn = g;
  } catch (err) {
    dialog.querySelector('.error').textContent = err.message;
  }
}

function usage(key) {
  const dialog = $('#usage-dialog');
  usageOf = key;
  dialog.querySelector('.which').textContent = key.apiKey;
  dialog.querySelector('.usage-key').replaceChildren();
  dialog.querySelector('.usage-owner').replaceChildren();
  delete dialog.dataset.drawn;
  dialog.showModal();
  void drawUsage();
}
$('#usage-dialog select[name=granularity]').addEventListener('change', () => {
  delete $('#usage-dialog').dataset.drawn;
  void drawUsage();
});

// Credits (PATCH /v1/keys/{apiKey} with `credits`, PUT /v1/owners/{owner} with `credits`, POST
// /v1/keys/{apiKey}/credits and POST /v1/owners/{owner}/credits with {"add": n}): what is left is read again
// after each change, so the dialog shows the balance as the admit step holds it, requests spent meanwhile included.
let creditsOf = null;
// The credits form's fields from credits as set or as they stand ({ remaining, refill? }); empty without any.
function fillCreditsForm(form, credits) {
  const f = form.elements;
  if (!credits) return;
  f.remaining.value = String(credits.remaining);
  if (credits.refill) {
    f.refillAmount.value = String(credits.refill.amount);
    f.refillInterval.value = credits.refill.interval;
  }
}
// The credits form's body: remaining, and a refill only when an amount is given.
function creditsBody(form) {
  const f = form.elements;
  const body = { remaining: amountOf(f.remaining) };
  if (f.refillAmount.value.trim() !== '')
    body.refill = { amount: amountOf(f.refillAmount), interval: f.refillInterval.value };
  return body;
}
// `first`: the dialog was just opened, and the owner's form starts from the owner's credits as they stand.
async function drawCredits(first) {
  const dialog = $('#credits-dialog');
  const key = creditsOf;
  try {
    const [record, owner] = await Promise.all([
      api('GET', `/v1/keys/${encodeURIComponent(key.apiKey)}`),
      key.owner ? api('GET', `/v1/owners/${encodeURIComponent(key.owner)}`) : null,
    ]);
    if (creditsOf !== key) return; // another key's dialog was opened meanwhile
    dialog.querySelector('.key-credits').textContent = creditsText(record.credits) || 'no credits: unlimited';
    dialog.querySelector('.owner-credits-left').textContent =
      (owner && creditsText(owner.credits)) || 'no credits: unlimited';
    const home = dialog.querySelector('.owner-home');
    home.textContent = owner && owner.home ? `home ${owner.home}` : '';
    home.hidden = home.textContent === '';
    if (first && owner) fillCreditsForm($('#owner-credits-set-form'), owner.credits);
  } catch (err) {
    dialog.querySelector('.error').textContent = err.message;
  }
}

function credits(key) {
  creditsOf = key;
  const dialog = $('#credits-dialog');
  dialog.querySelector('.which').textContent = key.apiKey;
  for (const form of dialog.querySelectorAll('form')) form.reset();
  fillCreditsForm($('#credits-set-form'), key.credits);
  dialog.querySelector('.owner-credits').hidden = !key.owner;
  dialog.querySelector('.owner').textContent = key.owner || '';
  dialog.querySelector('.key-credits').textContent = '';
  dialog.querySelector('.owner-credits-left').textContent = '';
  dialog.querySelector('.owner-home').textContent = '';
  dialog.querySelector('.owner-home').hidden = true;
  dialog.querySelector('.error').textContent = '';
  dialog.showModal();
  void drawCredits(true);
}

// One credits change, then the balances read again (dialog and table); a refusal in the form's words.
async function changeCredits(method, path, body) {
  const dialog = $('#credits-dialog');
  dialog.querySelector('.error').textContent = '';
  try {
    await api(method, path, body);
  } catch (err) {
    dialog.querySelector('.error').textContent = err.message;
    return;
  }
  await drawCredits(false);
  await load(false);
}

// An empty number field is sent as null, for the API to name, never as 0.
const amountOf = (input) => (input.value.trim() === '' ? null : Number(input.value));

$('#credits-set-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const body = creditsBody(event.target);
  void changeCredits('PATCH', `/v1/keys/${encodeURIComponent(creditsOf.apiKey)}`, { credits: body });
});
$('#credits-dialog .remove-credits').addEventListener('click', () => {
  void changeCredits('PATCH', `/v1/keys/${encodeURIComponent(creditsOf.apiKey)}`, { credits: null });
});
$('#credits-add-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const add = amountOf(event.target.elements.add);
  void changeCredits('POST', `/v1/keys/${encodeURIComponent(creditsOf.apiKey)}/credits`, { add });
});
// The owner's credits through PUT, which keeps what it is not given (the owner's rate limit, its home).
$('#owner-credits-set-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const body = creditsBody(event.target);
  void changeCredits('PUT', `/v1/owners/${encodeURIComponent(creditsOf.owner)}`, { credits: body });
});
$('#credits-dialog .remove-owner-credits').addEventListener('click', () => {
  void changeCredits('PUT', `/v1/owners/${encodeURIComponent(creditsOf.owner)}`, { credits: null });
});
$('#owner-credits-add-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const add = amountOf(event.target.elements.add);
  void changeCredits('POST', `/v1/owners/${encodeURIComponent(creditsOf.owner)}/credits`, { add });
});

function remove(key) {
  deleting = key;
  const form = $('#delete-form');
  form.reset();
  form.querySelector('.which').textContent = key.apiKey;
  form.querySelector('.error').textContent = '';
  form.querySelector('button[type=submit]').disabled = true;
  $('#delete-dialog').showModal();
}

// The confirmation is the key itself, typed: a click on the wrong row cannot delete a key.
const typedKeyMatches = () => deleting !== null && $('#delete-form').elements.confirm.value.trim() === deleting.apiKey;
$('#delete-form').elements.confirm.addEventListener('input', () => {
  $('#delete-form button[type=submit]').disabled = !typedKeyMatches();
});

$('#delete-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.target;
  // Enter in the field submits the form even while the button is disabled: check again.
  if (!typedKeyMatches()) {
    form.querySelector('.error').textContent = 'Type the API key exactly as shown to delete it.';
    return;
  }
  try {
    await api('DELETE', `/v1/keys/${encodeURIComponent(deleting.apiKey)}`);
    $('#delete-dialog').close();
    await load(false);
  } catch (err) {
    form.querySelector('.error').textContent = err.message;
  }
});

let rotating = null;
function rotate(key) {
  rotating = key;
  const form = $('#rotate-form');
  form.reset();
  form.querySelector('.which').textContent = key.apiKey;
  form.querySelector('.error').textContent = '';
  $('#rotate-dialog').showModal();
}

$('#rotate-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.target;
  const body = { graceSeconds: Number(form.elements.grace.value) };
  if (form.elements.reason.value.trim()) body.reason = form.elements.reason.value.trim();
  try {
    const rotated = await api('POST', `/v1/keys/${encodeURIComponent(rotating.apiKey)}/rotate`, body);
    $('#rotate-dialog').close();
    showSecret('Secret rotated', rotated);
    await load(false);
  } catch (err) {
    form.querySelector('.error').textContent = err.message;
  }
});

let editing = null;
function edit(key) {
  editing = key;
  const form = $('#edit-form');
  form.querySelector('.which').textContent = key.apiKey;
  form.elements.scopes.value = key.scopes.join(', ');
  form.elements.allowIps.value = key.allowIps.join(', ');
  form.elements.binding.value = key.binding || 'off';
  form.querySelector('.error').textContent = '';
  $('#edit-dialog').showModal();
}

$('#edit-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.target;
  try {
    await api('PATCH', `/v1/keys/${encodeURIComponent(editing.apiKey)}`, {
      scopes: list(form.elements.scopes.value),
      allowIps: list(form.elements.allowIps.value),
      binding: form.elements.binding.value,
    });
    $('#edit-dialog').close();
    await load(false);
  } catch (err) {
    form.querySelector('.error').textContent = err.message;
  }
});

$('#create-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.target;
  const body = { scopes: list(form.elements.scopes.value), allowIps: list(form.elements.allowIps.value) };
  if (form.elements.owner.value.trim()) body.owner = form.elements.owner.value.trim();
  if (form.elements.label.value.trim()) body.label = form.elements.label.value.trim();
  if (form.elements.expiresAt.value) body.expiresAt = `${form.elements.expiresAt.value}T00:00:00Z`;
  const rate = form.elements.rate.value.trim();
  const burst = form.elements.burst.value.trim();
  if (rate || burst) body.rateLimit = { ...(rate && { rate }), ...(burst && { burst: Number(burst) }) };
  if (form.elements.binding.value !== 'off') body.binding = form.elements.binding.value;
  const alg = form.elements.alg.value;
  if (alg !== 'HS256') {
    body.alg = alg;
    // Sent as pasted (trimmed): an empty field is the API's to refuse, in the same words as any other problem.
    body.publicKey = form.elements.publicKey.value.trim();
  }
  try {
    const created = await api('POST', '/v1/keys', body);
    $('#create-dialog').close();
    form.reset();
    showSecret('Key created', created);
    await load(false);
  } catch (err) {
    form.querySelector('.error').textContent = err.message;
  }
});

$('#copy-secret').addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText($('#secret-value').textContent);
    $('#copy-secret').textContent = 'Copied';
  } catch {
    // No clipboard permission: select the text so the operator can copy it by hand.
    const range = document.createRange();
    range.selectNodeContents($('#secret-value'));
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    $('#copy-secret').textContent = 'Selected: press Ctrl+C';
  }
});

$('#secret-done').addEventListener('click', () => {
  // The secret leaves the page: it is shown once.
  $('#secret-value').textContent = '';
  $('#secret-fingerprint').textContent = '';
  $('#secret-dialog').close();
});

for (const cancel of document.querySelectorAll('dialog .cancel'))
  cancel.addEventListener('click', () => cancel.closest('dialog').close());

$('#sign-in-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  token = $('#token').value.trim();
  $('#token').value = '';
  let me;
  try {
    me = await api('GET', '/v1/whoami');
  } catch (err) {
    signOut(err.status === 401 ? 'The token was refused.' : err.message);
    return;
  }
  canWrite = me.writes;
  $('#sign-in').hidden = true;
  $('#keys').hidden = false;
  $('#sign-out').hidden = false;
  $('#who').textContent = `signed in as ${me.name} (${me.access === 'write' ? 'read and write' : 'read-only'})`;
  $('#new-key').hidden = !canWrite;
  $('#read-only').hidden = canWrite;
  $('#read-only').textContent =
    me.access === 'write'
      ? 'Keygate runs on the embedded store: keys can be read here, and changed only with Redis.'
      : 'This token can read keys only: sign in with a write token to create, change, rotate, revoke or delete.';
  await load(false);
});

$('#filter').addEventListener('submit', (event) => {
  event.preventDefault();
  load(false);
});
$('#more').addEventListener('click', () => load(true));
$('#sort').addEventListener('change', draw);
// The public key field is there only for the algs that need one.
const showPublicKeyField = () => {
  $('#create-form .public-key').hidden = $('#create-form').elements.alg.value === 'HS256';
};
$('#create-form').elements.alg.addEventListener('change', showPublicKeyField);
$('#new-key').addEventListener('click', () => {
  // Each new key starts from an empty form: a cancelled attempt's values are not carried over.
  $('#create-form').reset();
  showPublicKeyField();
  $('#create-form').querySelector('.error').textContent = '';
  $('#create-dialog').showModal();
});
$('#sign-out').addEventListener('click', () => signOut(''));
