// Keygate operator console. Loaded as a file (the page's CSP is default-src 'self': no inline script).
// The management token lives in this module's memory only: never in storage, a cookie or a URL,
// so reloading the page signs out. Every value from the API is written with textContent, never as HTML.

let token = null;
let nextCursor = null;

const $ = (selector) => document.querySelector(selector);
const list = (text) =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.problems ? body.problems.join('; ') : (body && body.message) || `HTTP ${status}`);
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

function row(key) {
  const tr = document.createElement('tr');
  tr.dataset.apiKey = key.apiKey;
  const code = document.createElement('code');
  code.textContent = key.apiKey;
  const keyCell = document.createElement('td');
  keyCell.append(code);
  const state = document.createElement('span');
  state.className = `state ${key.status}`;
  state.textContent = key.status;
  const stateCell = document.createElement('td');
  stateCell.className = 'status';
  stateCell.append(state);
  const actions = document.createElement('td');
  actions.className = 'actions';
  if (key.status !== 'revoked') {
    actions.append(button('Change', () => edit(key)));
    if (key.status === 'active') actions.append(button('Rotate', () => rotate(key)));
    actions.append(button('Revoke', () => revoke(key), 'danger'));
  }
  tr.append(
    cell(key.owner || '', 'owner'),
    cell(key.label || '', 'label'),
    keyCell,
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
  try {
    const page = await api('GET', `/v1/keys?${q}`);
    const rows = page.keys.map(row);
    if (append) $('#key-table tbody').append(...rows);
    else $('#key-table tbody').replaceChildren(...rows);
    nextCursor = page.nextCursor;
    $('#more').hidden = nextCursor === null;
  } catch (err) {
    $('#keys-error').textContent = err.message;
  }
}

function showSecret(apiKey, secret) {
  $('#secret-api-key').textContent = apiKey;
  $('#secret-value').textContent = secret;
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

async function rotate(key) {
  if (
    (await confirmAction(`Rotate the secret of ${key.apiKey}? The old secret keeps working for 5 minutes.`, false)) ===
    null
  )
    return;
  try {
    const rotated = await api('POST', `/v1/keys/${encodeURIComponent(key.apiKey)}/rotate`, { graceSeconds: 300 });
    showSecret(rotated.apiKey, rotated.apiSecret);
    await load(false);
  } catch (err) {
    $('#keys-error').textContent = err.message;
  }
}

let editing = null;
function edit(key) {
  editing = key;
  const form = $('#edit-form');
  form.querySelector('.which').textContent = key.apiKey;
  form.elements.scopes.value = key.scopes.join(', ');
  form.elements.allowIps.value = key.allowIps.join(', ');
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
  try {
    const created = await api('POST', '/v1/keys', body);
    $('#create-dialog').close();
    form.reset();
    showSecret(created.apiKey, created.apiSecret);
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
  $('#secret-dialog').close();
});

for (const cancel of document.querySelectorAll('dialog .cancel'))
  cancel.addEventListener('click', () => cancel.closest('dialog').close());

$('#sign-in-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  token = $('#token').value.trim();
  $('#token').value = '';
  try {
    await api('GET', '/v1/keys?limit=1');
  } catch (err) {
    signOut(err.status === 401 ? 'The token was refused.' : err.message);
    return;
  }
  $('#sign-in').hidden = true;
  $('#keys').hidden = false;
  $('#sign-out').hidden = false;
  $('#who').textContent = 'signed in';
  await load(false);
});

$('#filter').addEventListener('submit', (event) => {
  event.preventDefault();
  load(false);
});
$('#more').addEventListener('click', () => load(true));
$('#new-key').addEventListener('click', () => {
  $('#create-form').querySelector('.error').textContent = '';
  $('#create-dialog').showModal();
});
$('#sign-out').addEventListener('click', () => signOut(''));
