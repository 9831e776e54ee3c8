import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { generateManagementToken, sha256Hex } from '../../src/config/management-tokens.js';
import { OPENAPI_FILE } from '../../src/management/management-server.js';
import { send, type Reply } from './http.js';
import { readFileSync } from 'node:fs';

export interface TokensFile {
  readonly file: string;
  /** name -> the token text (what a caller sends). */
  readonly tokens: Record<string, string>;
}

/** A tokens file as an operator writes it: only SHA-256 digests, the tokens themselves returned to the test. */
export function writeTokensFile(
  entries: ReadonlyArray<{ name: string; access: 'read' | 'write' }>,
  dir = mkdtempSync(join(tmpdir(), 'keygate-mgmt-')),
): TokensFile {
  const tokens: Record<string, string> = {};
  const lines = entries.map((e) => {
    const t = generateManagementToken();
    tokens[e.name] = t;
    return `  - { name: ${e.name}, sha256: ${sha256Hex(t)}, access: ${e.access} }`;
  });
  const file = join(dir, 'management-tokens.yaml');
  writeFileSync(file, `tokens:\n${lines.join('\n')}\n`);
  return { file, tokens };
}

type OpenApi = {
  paths: Record<
    string,
    Record<
      string,
      { responses: Record<string, { $ref?: string; content?: { 'application/json'?: { schema: unknown } } }> }
    >
  >;
  components: { responses: Record<string, { content?: { 'application/json'?: { schema: unknown } } }> };
};

/** Which documented path a request path is. */
function templateOf(path: string): string {
  const p = path.split('?')[0] as string;
  if (['/v1/openapi.json', '/v1/keys', '/v1/audit', '/v1/whoami', '/v1/secret-scanning/github'].includes(p)) return p;
  const parts = p.split('/');
  if (parts[2] === 'webhooks') return parts.length === 6 ? '/v1/webhooks/deliveries/{id}/retry' : p;
  if (parts[2] === 'owners') return parts.length === 5 ? `/v1/owners/{owner}/${parts[4]}` : '/v1/owners/{owner}';
  return parts.length === 5 ? `/v1/keys/{apiKey}/${parts[4]}` : '/v1/keys/{apiKey}';
}

/**
 * Validates answers against config/management-openapi.json: the status must be
 * documented for that path and method, and a JSON body must match its schema.
 * Every management answer a test receives goes through here, so the document cannot drift.
 */
export function createOpenApiCheck(): { check(method: string, path: string, reply: Reply): void; checked: number } {
  const doc = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8')) as OpenApi;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: 'openapi' });
  const cache = new Map<string, ValidateFunction>();
  const state = {
    checked: 0,
    check(method: string, path: string, reply: Reply) {
      const template = templateOf(path);
      const op = doc.paths[template]?.[method.toLowerCase() === 'head' ? 'get' : method.toLowerCase()];
      if (!op) throw new Error(`OpenAPI: ${method} ${template} is not documented`);
      let response = op.responses[String(reply.status)];
      if (!response)
        throw new Error(`OpenAPI: ${method} ${template} does not document status ${reply.status} (body ${reply.body})`);
      let pointer = `openapi#/paths/${template.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${reply.status}`;
      if (response.$ref) {
        const name = response.$ref.split('/').pop() as string;
        const referenced = doc.components.responses[name];
        if (!referenced) throw new Error(`OpenAPI: ${response.$ref} is not in components/responses`);
        response = referenced;
        pointer = `openapi#/components/responses/${name}`;
      }
      const schema = response.content?.['application/json']?.schema;
      if (schema === undefined) {
        if (reply.body !== '')
          throw new Error(`OpenAPI: ${method} ${template} ${reply.status} documents no body, got ${reply.body}`);
      } else {
        if (!/^application\/json/.test(String(reply.headers['content-type'])))
          throw new Error(`OpenAPI: ${method} ${template} ${reply.status}: not JSON`);
        const ref = `${pointer}/content/application~1json/schema`;
        let validate = cache.get(ref);
        if (!validate) {
          validate = ajv.compile({ $ref: ref });
          cache.set(ref, validate);
        }
        if (!validate(JSON.parse(reply.body)))
          throw new Error(
            `OpenAPI: ${method} ${template} ${reply.status} body ${reply.body.slice(0, 2000)} does not match: ${ajv.errorsText(validate.errors)}`,
          );
      }
      state.checked++;
    },
  };
  return state;
}

export interface ManagementClient {
  call(
    method: string,
    path: string,
    options?: { token?: string | null; json?: unknown; body?: string; headers?: Record<string, string | string[]> },
  ): Promise<Reply>;
}

/** A client whose every answer is checked against the OpenAPI document. */
export function managementClient(base: string, defaultToken: string, openapi = createOpenApiCheck()): ManagementClient {
  return {
    async call(method, path, options = {}) {
      const token = options.token === undefined ? defaultToken : options.token;
      const headers: Record<string, string | string[]> = {
        ...(token !== null && { authorization: `Bearer ${token}` }),
        ...options.headers,
      };
      let body = options.body;
      if (options.json !== undefined) {
        body = JSON.stringify(options.json);
        headers['content-type'] ??= 'application/json';
      }
      const reply = await send(base, path, { method, headers, ...(body !== undefined && { body }) });
      openapi.check(method, path, reply);
      return reply;
    },
  };
}
