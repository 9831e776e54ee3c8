// @ts-check
// The physical reference: nginx as a plain reverse proxy with keep-alive to the
// upstream (one worker, access log buffered to a file), started only when
// nginx is on PATH.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
