# Sourced by bin/serve and bin/test: make .venv exist and hold the project (plus optional extras).
# Reinstalls only when pyproject.toml or the requested extras changed (a stamp file records both).

ensure_venv() {
  local extras="$1"  # "" or "test"
  local root venv stamp python want have spec
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  venv="$root/.venv"
  stamp="$venv/.mcp-install-stamp"

  if [ ! -x "$venv/bin/python" ]; then
    python="$(_find_python)" || return 1
    echo "==> creating $venv with $($python --version 2>&1)"
    if ! "$python" -m venv "$venv" 2>/dev/null; then
      # Debian/Ubuntu ship ensurepip separately (python3-venv); fall back to the system pip if any.
      rm -rf "$venv"
      "$python" -m venv --without-pip "$venv" || return 1
      if ! "$python" -m pip --version >/dev/null 2>&1; then
        echo "error: '$python -m venv' cannot install pip and there is no system pip." >&2
        echo "       Install the venv module (e.g. 'apt-get install python3-venv') and run this again." >&2
        rm -rf "$venv"
        return 1
      fi
      "$python" -m pip --python "$venv/bin/python" install --quiet pip || return 1
    fi
  fi

  # One line: hash of pyproject.toml, then the extras installed with it.
  want="$("$venv/bin/python" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$root/pyproject.toml")"
  have="$(cat "$stamp" 2>/dev/null || true)"
  # A test install is a superset of the plain one: serve may reuse it.
  if [ "$have" = "$want test" ] || { [ -z "$extras" ] && [ "$have" = "$want " ]; }; then
    return 0
  fi
  spec="."
  [ -n "$extras" ] && spec=".[$extras]"
  echo "==> installing the project into .venv (uv pip install -e '$spec'; first run or pyproject.toml changed)"
  # uv (a PyPI wheel) resolves and installs the ~150 packages in seconds where pip takes a minute;
  # pip remains the fallback where uv cannot be had.
  if [ -x "$venv/bin/uv" ] || "$venv/bin/python" -m pip install --disable-pip-version-check -qq uv 2>/dev/null; then
    # --compile-bytecode: uv writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set (this
    # machine image sets it) every process would compile Django, the SDK and the rest anew: 5.8 s to
    # import the ASGI app instead of 2.3 s, paid by each server, worker and manage.py the tests start.
    (cd "$root" && "$venv/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python" -e "$spec") || return 1
  else
    (cd "$root" && "$venv/bin/python" -m pip install --disable-pip-version-check -qq -e "$spec") || return 1
  fi
  printf '%s %s\n' "$want" "$extras" >"$stamp"
}

# The project's own modules are an editable install, compiled by neither installer: let the processes
# cache their bytecode even where the environment says not to (see --compile-bytecode above).
unset PYTHONDONTWRITEBYTECODE

_find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3 python3.13 python3.12 python3.11 python; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "error: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11 to choose one)." >&2
  return 1
}
