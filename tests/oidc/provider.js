// A real OpenID Connect provider for the dashboard's sign-in browser test
// (tests/e2e/test_oidc_sign_in.py): panva's oidc-provider (OpenID Certified), with the dashboard
// registered as a confidential client, a second application registered beside it, test users
// with passwords, and a plain login form.
//
//   node provider.js PORT DASHBOARD_REDIRECT_URI
//
// It listens on 127.0.0.1:PORT with the issuer http://localhost:PORT, prints "ready" once it
// answers, and reaches nothing outside this machine.
//
// Two test users exist to check the dashboard's audience check. Their sign-in is real, but the
// token endpoint then hands the dashboard an ID token that this provider signed, with the same
// claims (nonce, at_hash, sub, email, expiry), for another audience: the other application
// ("other-app"). One carries no azp; the other names the dashboard as its authorized party, as
// a cross-client token does. OpenID Connect Core 3.1.3.7 says the dashboard must refuse both,
// because its client id is not in `aud`.
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';

import Provider from 'oidc-provider';
import { exportJWK, generateKeyPair, SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';

const [port, dashboardRedirect] = process.argv.slice(2);
if (!port || !dashboardRedirect) {
  console.error('usage: node provider.js PORT DASHBOARD_REDIRECT_URI');
  process.exit(2);
}
const issuer = `http://localhost:${port}`;

const DASHBOARD = { id: 'cpdecomp-dashboard', secret: 'dashboard-test-secret' };
const OTHER_APP = { id: 'other-app', secret: 'other-app-test-secret' };

// login -> the account: its password and the claims the provider vouches for.
const ACCOUNTS = {
  ada: {
    password: 'ada-password',
    claims: {
      sub: 'ada-0001', email: 'ada.lovelace@hospital.example', email_verified: true,
      name: 'Dr. Ada Lovelace', preferred_username: 'ada',
    },
  },
  grace: {
    password: 'grace-password',
    claims: {
      sub: 'grace-0002', email: 'grace.hopper@hospital.example', email_verified: true,
      name: 'Dr. Grace Hopper', preferred_username: 'grace',
    },
  },
  // An ID token for the other application, no azp.
  'other-audience': {
    password: 'other-password',
    audience: { aud: OTHER_APP.id },
    claims: {
      sub: 'oa-0003', email: 'other.audience@hospital.example', email_verified: true,
      name: 'Other Audience', preferred_username: 'other-audience',
    },
  },
  // An ID token for the other application, naming the dashboard as its authorized party.
  'other-audience-azp': {
    password: 'other-password',
    audience: { aud: OTHER_APP.id, azp: DASHBOARD.id },
    claims: {
      sub: 'oa-0004', email: 'other.audience.azp@hospital.example', email_verified: true,
      name: 'Other Audience Azp', preferred_username: 'other-audience-azp',
    },
  },
};
const SUBJECTS = Object.fromEntries(Object.entries(ACCOUNTS).map(([login, a]) => [a.claims.sub, login]));

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: 'test-key-1', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: DASHBOARD.id,
      client_secret: DASHBOARD.secret,
      redirect_uris: [dashboardRedirect],
      post_logout_redirect_uris: [dashboardRedirect],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    {
      client_id: OTHER_APP.id,
      client_secret: OTHER_APP.secret,
      redirect_uris: ['http://localhost:9/other-app/callback'],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
  },
  // The scope's claims in the ID token itself, as Keycloak, Okta and Entra ID put them:
  // Streamlit reads the identity from the ID token, not from the userinfo endpoint.
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: true },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  // A hospital's own application: its users are not asked to consent to it.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      accountId: ctx.oidc.session.accountId, clientId: ctx.oidc.client.clientId,
    });
    grant.addOIDCScope('openid email profile');
    await grant.save();
    return grant;
  },
  async findAccount(ctx, sub) {
    const login = SUBJECTS[sub];
    if (!login) return undefined;
    return { accountId: sub, claims: async () => ({ ...ACCOUNTS[login].claims }) };
  },
});

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginForm(uid, message) {
  return `<!doctype html><html><head><title>Hospital sign-in</title></head><body>
<h1>Hospital sign-in</h1>${message ? `<p role="alert">${escape(message)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}">
<label>Username <input name="login" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
<button type="submit">Sign in</button></form></body></html>`;
}

async function formBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// The login page, and the token endpoint's substitution for the other-audience users.
provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([\w-]+)$/.exec(ctx.path);
  if (match) {
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (details.prompt.name !== 'login') ctx.throw(501, `no page for the ${details.prompt.name} prompt`);
    ctx.type = 'html';
    if (ctx.method === 'GET') {
      ctx.body = loginForm(details.uid);
      return;
    }
    const form = await formBody(ctx.req);
    const account = ACCOUNTS[form.get('login')];
    if (!account || account.password !== form.get('password')) {
      ctx.body = loginForm(details.uid, 'Wrong username or password.');
      return;
    }
    ctx.respond = false;
    await provider.interactionFinished(ctx.req, ctx.res, {
      login: { accountId: account.claims.sub },
    }, { mergeWithLastSubmission: false });
    return;
  }
  await next();
  if (ctx.path === '/token' && ctx.body && typeof ctx.body.id_token === 'string') {
    const claims = decodeJwt(ctx.body.id_token);
    const login = SUBJECTS[claims.sub];
    const audience = login && ACCOUNTS[login].audience;
    if (audience) {
      const { kid, alg } = decodeProtectedHeader(ctx.body.id_token);
      const { aud, azp, ...rest } = claims;
      ctx.body = {
        ...ctx.body,
        id_token: await new SignJWT({ ...rest, ...audience })
          .setProtectedHeader({ alg, kid }).sign(privateKey),
      };
    }
  }
});

const server = createServer(provider.callback());
server.listen(Number(port), '127.0.0.1', () => console.log('ready'));
