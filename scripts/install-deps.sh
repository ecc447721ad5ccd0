#!/usr/bin/env bash
# Installs the Debian packages nmt builds against, if any are missing.
# Idempotent: with everything present it changes nothing and needs no network.
set -euo pipefail
pkgs="build-essential cmake pkg-config libcli11-dev libsentencepiece-dev sentencepiece
      libdnnl-dev nlohmann-json3-dev catch2 libicu-dev zlib1g-dev clang libomp-dev time
      openmpi-bin libopenmpi-dev libcairo2-dev python3 libmecab-dev mecab-ipadic-utf8
      libzip-dev libyaml-cpp-dev libxml2-dev qemu-user libcpp-httplib-dev chromium
      debootstrap zsh fish pybind11-dev python3-dev python3-pytest"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing$missing" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi
