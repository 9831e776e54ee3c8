#!/bin/sh
# Writes the example's secrets into secrets/ beside this script, for kustomize's secretGenerator
# (kustomization.yaml). Run it once, before the first `kubectl apply -k`:
#   sh deploy/kubernetes/overlays/example/generate-secrets.sh
# Needs only openssl. Every value is random: nothing here is a placeholder to replace.
#   secrets/secret-encryption-key    32 random bytes, base64 (KEYGATE_SECRET_ENCRYPTION_KEY_FILE)
#   secrets/redis-password           32 random bytes, hex (URL-safe)
#   secrets/redis-url                redis://:(that password)@redis:6379 (KEYGATE_REDIS_URL_FILE)
#   secrets/redis-auth.conf          requirepass (that password), included by the example's Redis
#   secrets/management-tokens.yaml   one write token, "operator" (KEYGATE_MANAGEMENT_TOKENS_FILE);
#                                    the token itself is printed once, only its SHA-256 is kept
#   secrets/webhook-secret           whsec_ + 32 random bytes, base64 (KEYGATE_WEBHOOK_SECRET_FILE):
#                                    give your webhook receiver the same value
#   secrets/github-scanning-keys.json  GitHub's secret scanning public keys (not secret: the ConfigMap
#                                    github-scanning-keys), fetched from api.github.com with curl, or
#                                    copied from the file GITHUB_SCANNING_KEYS names (offline)
# It refuses to overwrite: a new encryption key would leave the secrets sealed with the old one
# unreadable. To start over, delete secrets/ and the keygate-example namespace.
set -eu
umask 077
dir="$(cd "$(dirname "$0")" && pwd)/secrets"
if [ -e "$dir" ]; then
  echo "generate-secrets.sh: $dir exists already; not overwriting it (delete it to start over)" >&2
  exit 1
fi
command -v openssl >/dev/null 2>&1 || { echo "generate-secrets.sh: needs openssl" >&2; exit 1; }
# GitHub's keys first: a failed fetch leaves nothing half written.
keys="$(mktemp)"
trap 'rm -f "$keys"' EXIT
if [ -n "${GITHUB_SCANNING_KEYS:-}" ]; then
  cp "$GITHUB_SCANNING_KEYS" "$keys"
elif ! curl -fsS https://api.github.com/meta/public_keys/secret_scanning > "$keys"; then
  echo "generate-secrets.sh: could not fetch GitHub's secret scanning keys; set GITHUB_SCANNING_KEYS to a saved copy" >&2
  exit 1
fi
mkdir -p "$dir"
cp "$keys" "$dir/github-scanning-keys.json"
chmod 600 "$dir/github-scanning-keys.json"
password="$(openssl rand -hex 32)"
openssl rand -base64 32 > "$dir/secret-encryption-key"
printf '%s\n' "$password" > "$dir/redis-password"
printf 'redis://:%s@redis:6379\n' "$password" > "$dir/redis-url"
printf 'requirepass %s\n' "$password" > "$dir/redis-auth.conf"
# A management token as `keygate management-token` makes one: kgm_ + 32 random bytes, base64url.
token="kgm_$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=\n')"
sha256="$(printf '%s' "$token" | openssl dgst -sha256 -r | cut -d ' ' -f 1)"
printf 'tokens:\n  - { name: operator, sha256: %s, access: write }\n' "$sha256" > "$dir/management-tokens.yaml"
printf 'whsec_%s\n' "$(openssl rand -base64 32 | tr -d '\n')" > "$dir/webhook-secret"
echo "wrote $dir"
echo "management token \"operator\" (write access; shown only now, keep it secret):"
echo "  $token"
