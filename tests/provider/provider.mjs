// A real OpenID Connect provider (panva's oidc-provider, pinned in package.json) for the team-mode tests.
//
// Started by tests/provider_support.py with one argument, a JSON object:
//   modules   the node_modules folder the pinned package was installed into (the shared test cache, not here)
//   port      0 for any free port on 127.0.0.1, or the port of an earlier run of the same provider (a restart)
//   store     a file the provider keeps its grants and tokens in, so that a restart finds them again
//   cookieKeys, clients, scopes, introspectionClaims, shortLivedClients: see provider_support.py
// Prints one line of JSON, {"issuer": …}, once it answers requests. Any login name signs in, with any password,
// through the package's own development login and consent pages (devInteractions).
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const config = JSON.parse(process.argv[2]);
// The package's main file as `require` would find it from the cache's node_modules (it has no "exports" map).
const entry = createRequire(join(config.modules, 'noop.js')).resolve('oidc-provider');
const { default: Provider } = await import(pathToFileURL(entry).href);

// A short-lived client's access tokens expire this fast, so a test sees expiry without a long wait.
const SHORT_TTL_SECONDS = 4;  // provider_support.SHORT_TTL_SECONDS: long enough for a loaded machine to use it once
const ACCESS_TOKEN_TTL_SECONDS = 3600;

// Everything the provider stores, kept in memory and written through to `config.store` on every change.
const saved = config.store && existsSync(config.store) ? JSON.parse(readFileSync(config.store, 'utf8')) : {};
const models = saved.models ?? {};
const keys = saved.keys ?? { keys: [{ ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }), use: 'sig', kid: 'test' }] };

function persist() {
  if (!config.store) return;
  writeFileSync(`${config.store}.tmp`, JSON.stringify({ models, keys }));
  renameSync(`${config.store}.tmp`, config.store);
}

const now = () => Math.floor(Date.now() / 1000);

class FileAdapter {
  constructor(name) {
    this.rows = models[name] ??= {};
  }

  async upsert(id, payload, expiresIn) {
    this.rows[id] = { payload, expiresAt: expiresIn ? now() + expiresIn : undefined };
    persist();
  }

  async find(id) {
    const row = this.rows[id];
    if (!row || (row.expiresAt !== undefined && row.expiresAt <= now())) return undefined;
    return row.payload;
  }

  async findByUid(uid) {
    const id = Object.keys(this.rows).find((key) => this.rows[key].payload.uid === uid);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = Object.keys(this.rows).find((key) => this.rows[key].payload.userCode === userCode);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    if (this.rows[id]) this.rows[id].payload.consumed = now();
    persist();
  }

  async destroy(id) {
    delete this.rows[id];
    persist();
  }

  async revokeByGrantId(grantId) {
    for (const [id, row] of Object.entries(this.rows)) {
      if (row.payload.grantId === grantId) delete this.rows[id];
    }
    persist();
  }
}

function claimsOf(login) {
  return {
    sub: login,
    email: `${login}@example.test`,
    email_verified: true,
    name: login.charAt(0).toUpperCase() + login.slice(1),
  };
}

// The loopback redirect URIs a test's server listens on: any port, any path ending in /callback.
function loopbackCallback(value) {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' && ['127.0.0.1', 'localhost'].includes(url.hostname) && url.pathname.endsWith('/callback') && !url.hash;
  } catch {
    return false;
  }
}

const server = createServer();
await new Promise((resolve) => server.listen(config.port, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const shortLived = new Set(config.shortLivedClients ?? []);

const provider = new Provider(issuer, {
  adapter: FileAdapter,
  clients: config.clients,
  cookies: { keys: config.cookieKeys },
  jwks: keys,
  scopes: ['openid', 'offline_access', 'email', 'profile', ...config.scopes],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => claimsOf(sub) }),
  pkce: { required: () => true },
  ttl: {
    AccessToken: (_ctx, _token, client) => (shortLived.has(client.clientId) ? SHORT_TTL_SECONDS : ACCESS_TOKEN_TTL_SECONDS),
  },
  // What a provider such as Keycloak puts in an introspection answer besides the token's own fields.
  extraTokenClaims: async (_ctx, token) => {
    if (!config.introspectionClaims || !token.accountId) return undefined;
    const { sub: _sub, ...claims } = claimsOf(token.accountId);
    return claims;
  },
  features: {
    devInteractions: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    userinfo: { enabled: true },
    // RFC 8707: a token asked for with resource=URL carries that URL as its audience, and only these scopes.
    resourceIndicators: {
      enabled: true,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resource) => ({
        scope: config.scopes.join(' '),
        audience: resource,
        accessTokenFormat: 'opaque',
      }),
    },
  },
});
provider.Client.prototype.redirectUriAllowed = function redirectUriAllowed(value) {
  return this.redirectUris.includes(value) || loopbackCallback(value);
};
server.on('request', provider.callback());
process.stdout.write(`${JSON.stringify({ issuer })}\n`);
