#!/usr/bin/env bash
# Installs hookbus as systemd services on this host, as root, from a checkout or a wheel:
#   sudo deploy/systemd/install.sh [SOURCE]        (SOURCE: a checkout or a .whl; default .)
# It creates the system user `hookbus`, a venv in /opt/hookbus (the unit's ExecStart), the
# folders /etc/hookbus (env file, verify key) and /var/lib/hookbus (the unit's working and
# only writable folder, with the bundle cache), installs hookbus-worker@.service, checks it
# with `systemd-analyze verify` and reloads systemd. Then, per role:
#   systemctl enable --now hookbus-worker@chain hookbus-worker@fanout hookbus-worker@rq
# Nothing is started by this script, and running it again upgrades hookbus in place.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source="${1:-.}"
prefix="${INSTALL_PREFIX:-/opt/hookbus}"
python="${PYTHON:-python3}"

[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (it creates a user and system folders)" >&2; exit 77; }
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "install.sh: $python must be Python 3.11 or newer (set PYTHON=...)" >&2; exit 78; }

if ! id hookbus >/dev/null 2>&1; then
  useradd --system --home-dir /var/lib/hookbus --no-create-home --shell /usr/sbin/nologin hookbus
fi
install -d -m 0755 -o root -g root "$prefix"
install -d -m 0750 -o root -g hookbus /etc/hookbus
install -d -m 0750 -o hookbus -g hookbus /var/lib/hookbus /var/lib/hookbus/cache

[ -x "$prefix/bin/python" ] || "$python" -m venv "$prefix"
"$prefix/bin/pip" install --quiet --upgrade pip
"$prefix/bin/pip" install --quiet --upgrade "$source"

if [ ! -e /etc/hookbus/env ]; then
  # the Redis URL belongs here (or in HOOKBUS_REDIS_URL_FILE), readable by root and the
  # service only, never on a command line
  install -m 0640 -o root -g hookbus /dev/null /etc/hookbus/env
  echo "# HOOKBUS_REDIS_URL=redis://hookbus-worker:PASSWORD@127.0.0.1:6379/0" > /etc/hookbus/env
fi
[ -e /etc/hookbus/verify.key ] \
  || echo "install.sh: copy your verify key to /etc/hookbus/verify.key (hookbus keys generate)" >&2

install -m 0644 "$here/hookbus-worker@.service" /etc/systemd/system/hookbus-worker@.service
systemd-analyze verify --man=no hookbus-worker@chain.service
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
echo "install.sh: $("$prefix/bin/hookbus" --version) installed in $prefix"
