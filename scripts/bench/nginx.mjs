// @ts-check
// The physical reference: nginx as a plain reverse proxy with keep-alive to the
// upstream (one worker, access log buffered to a file), started only when
// nginx is on PATH.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function nginxAvailable() {
  return !spawnSync('nginx', ['-v']).error;
}

/**
 * Writes a config into `dir` and returns the argv to run nginx in the foreground.
 * @param {string} dir
 * @param {number} port
 * @param {string} upstreamUrl
 */
export function nginxArgs(dir, port, upstreamUrl) {
  const prefix = join(dir, 'nginx');
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  const upstream = new URL(upstreamUrl).host;
  const conf = `worker_processes 1;
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 8192; }
http {
  access_log ${prefix}/logs/access.log combined buffer=64k flush=1s;
  client_body_temp_path ${prefix}/body; proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi; uwsgi_temp_path ${prefix}/uwsgi; scgi_temp_path ${prefix}/scgi;
  upstream backend { server ${upstream}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
  const file = join(prefix, 'nginx.conf');
  writeFileSync(file, conf);
  return ['-p', prefix, '-c', file];
}

/**
 * The shipped deploy/nginx/forward-auth.conf with only its placeholders filled in (nginx in front,
 * Keygate in forward-auth mode as its auth endpoint). Returns the argv to run it in the foreground.
 * @param {string} dir
 * @param {string} root the repository
 * @param {number} port
 * @param {string} keygateUrl
 * @param {string} upstreamUrl
 */
export function forwardAuthNginxArgs(dir, root, port, keygateUrl, upstreamUrl) {
  const prefix = join(dir, 'nginx-forward-auth');
  mkdirSync(join(prefix, 'tmp'), { recursive: true });
  chmodSync(prefix, 0o755);
  const conf = readFileSync(join(root, 'deploy/nginx/forward-auth.conf'), 'utf8')
    .replaceAll('__LISTEN__', `127.0.0.1:${port}`)
    .replaceAll('__KEYGATE__', new URL(keygateUrl).host)
    .replaceAll('__UPSTREAM__', new URL(upstreamUrl).host);
  const file = join(prefix, 'nginx.conf');
  writeFileSync(file, conf);
  return ['-p', prefix, '-c', file, '-e', 'stderr', '-g', 'daemon off;'];
}

/** Where Debian's libnginx-mod-http-lua, lua-resty-core and lua-cjson put their files. */
const LUA_MODULES = ['/usr/lib/nginx/modules/ndk_http_module.so', '/usr/lib/nginx/modules/ngx_http_lua_module.so'];
const LUA_PATH = '/usr/share/lua/5.1';
const LUA_CPATH = '/usr/lib/x86_64-linux-gnu/lua/5.1';

/**
 * Whether the nginx+lua peer can run: nginx plus Debian's libnginx-mod-http-lua, lua-resty-core
 * and lua-cjson (scripts/test-all.sh installs them). `undefined` when it can, else what is missing.
 * @returns {string | undefined}
 */
export function nginxLuaMissing() {
  if (!nginxAvailable()) return 'nginx';
  const files = [...LUA_MODULES, join(LUA_PATH, 'resty/core.lua'), join(LUA_CPATH, 'cjson.so')];
  const missing = files.filter((f) => !existsSync(f));
  return missing.length ? `libnginx-mod-http-lua lua-resty-core lua-cjson (${missing.join(', ')})` : undefined;
}

/**
 * The peer a user would choose instead of Keygate: nginx with lua (OpenResty's lua-nginx-module)
 * doing the same checks on the same Redis, then proxying like the nginx reference. Per request:
 * Bearer token split, header and payload base64url-decoded and JSON-parsed (cjson), alg HS256, the
 * key's secret looked up by `sub`, HMAC-SHA256 through OpenSSL (LuaJIT FFI, the library nginx is
 * linked with) compared with the signature, the nonce (ns since the epoch) within the receive window,
 * then `SET <nonce key> 1 PX <2 × window + 5 s> NX` on a pooled cosocket connection (plain RESP: Debian
 * ships no lua-resty-redis): +OK forwards, a nil reply is a replay (401), anything else 503.
 * One worker, access log buffered to a file. Returns the argv to run nginx in the foreground.
 * @param {string} dir
 * @param {number} port
 * @param {string} upstreamUrl
 * @param {{ redisPort: number, keys: Record<string, string>, recvWindowSeconds?: number }} o apiKey → secret
 */
export function nginxLuaArgs(dir, port, upstreamUrl, { redisPort, keys, recvWindowSeconds = 30 }) {
  const prefix = join(dir, 'nginx-lua');
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  const upstream = new URL(upstreamUrl).host;
  const luaKeys = Object.entries(keys)
    .map(([k, v]) => `[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    .join(', ');
  writeFileSync(join(prefix, 'keygate_peer.lua'), PEER_LUA);
  const conf = `worker_processes 1;
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
${LUA_MODULES.map((m) => `load_module ${m};`).join('\n')}
events { worker_connections 8192; }
http {
  access_log ${prefix}/logs/access.log combined buffer=64k flush=1s;
  client_body_temp_path ${prefix}/body; proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi; uwsgi_temp_path ${prefix}/uwsgi; scgi_temp_path ${prefix}/scgi;
  lua_package_path "${prefix}/?.lua;${LUA_PATH}/?.lua;;";
  lua_package_cpath "${LUA_CPATH}/?.so;;";
  init_by_lua_block {
    require("keygate_peer").init({ ${luaKeys} }, "127.0.0.1", ${redisPort}, ${recvWindowSeconds})
  }
  upstream backend { server ${upstream}; keepalive 256; }
  server {
    listen 127.0.0.1:${port};
    location / {
      access_by_lua_block { require("keygate_peer").access() }
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "";
    }
  }
}
`;
  const file = join(prefix, 'nginx.conf');
  writeFileSync(file, conf);
  return ['-p', prefix, '-c', file];
}

const PEER_LUA = `-- The nginx+lua peer of scripts/bench (nginx.mjs nginxLuaArgs): Keygate's checks for an HS256 token.
local ffi = require("ffi")
local b64 = require("ngx.base64")
local cjson = require("cjson.safe")

ffi.cdef[[
typedef struct evp_md_st EVP_MD;
const EVP_MD *EVP_sha256(void);
unsigned char *HMAC(const EVP_MD *evp_md, const void *key, int key_len, const unsigned char *d, size_t n,
                    unsigned char *md, unsigned int *md_len);
]]
-- nginx is linked with OpenSSL: its symbols are in the process already.
local ok, crypto = pcall(function() return ffi.C.EVP_sha256 and ffi.C end)
if not ok then crypto = ffi.load("libcrypto.so.3") end

local _M = {}
local secrets, host, port, window_ms, ttl
local sha256 = crypto.EVP_sha256()
local md = ffi.new("unsigned char[32]")
local md_len = ffi.new("unsigned int[1]")

function _M.init(keys, redis_host, redis_port, recv_window_seconds)
  secrets, host, port = keys, redis_host, redis_port
  window_ms = recv_window_seconds * 1000
  ttl = tostring(recv_window_seconds * 2000 + 5000)
end

local function refuse(status, code)
  ngx.status = status
  ngx.header["Content-Type"] = "application/json"
  ngx.print('{"code":', code, '}')
  return ngx.exit(status)
end

local function json_part(part)
  local raw = b64.decode_base64url(part)
  return raw and cjson.decode(raw)
end

function _M.access()
  local auth = ngx.var.http_authorization
  if not auth or auth:sub(1, 7) ~= "Bearer " then return refuse(401, 40101) end
  local d1 = auth:find(".", 8, true)
  local d2 = d1 and auth:find(".", d1 + 1, true)
  if not d2 then return refuse(401, 40102) end
  local header = json_part(auth:sub(8, d1 - 1))
  if type(header) ~= "table" or header.alg ~= "HS256" then return refuse(401, 40102) end
  local claims = json_part(auth:sub(d1 + 1, d2 - 1))
  if type(claims) ~= "table" or type(claims.sub) ~= "string" or type(claims.nonce) ~= "string" then
    return refuse(401, 40102)
  end
  local secret = secrets[claims.sub]
  if not secret then return refuse(401, 40103) end
  crypto.HMAC(sha256, secret, #secret, ffi.cast("const unsigned char *", auth) + 7, d2 - 8, md, md_len)
  if b64.encode_base64url(ffi.string(md, md_len[0])) ~= auth:sub(d2 + 1) then return refuse(401, 40106) end
  -- ns since the epoch: its first digits are ms (a double holds 13 digits exactly).
  local nonce = claims.nonce
  local nonce_ms = #nonce > 6 and tonumber(nonce:sub(1, -7))
  if not nonce_ms or math.abs(nonce_ms - ngx.now() * 1000) >= window_ms then return refuse(401, 40107) end
  local key = "peer:{" .. claims.sub .. "}:nonce:" .. nonce
  local sock = ngx.socket.tcp()
  sock:settimeouts(1000, 1000, 1000)
  local connected = sock:connect(host, port)
  if not connected then return refuse(503, 50301) end
  local sent = sock:send({ "*6\\r\\n$3\\r\\nSET\\r\\n$", #key, "\\r\\n", key, "\\r\\n$1\\r\\n1\\r\\n$2\\r\\nPX\\r\\n$",
    #ttl, "\\r\\n", ttl, "\\r\\n$2\\r\\nNX\\r\\n" })
  local line = sent and sock:receive("*l")
  if line == "+OK" then
    sock:setkeepalive(60000, 256)
    return
  end
  if line == "$-1" then
    sock:setkeepalive(60000, 256)
    return refuse(401, 40108)
  end
  sock:close()
  return refuse(503, 50301)
end

return _M
`;
