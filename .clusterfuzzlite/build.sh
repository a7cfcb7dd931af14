#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build: the library with $CC $CFLAGS (the engine's
# instrumentation), each fuzz target linked with $LIB_FUZZING_ENGINE, its seed
# corpus zipped next to it, the .tg dictionary for the reader.
cmake -S . -B build-cfl -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_BUILD_TYPE=Release \
  -DTG_CUDA=OFF -DTG_BUILD_TESTS=OFF
cmake --build build-cfl -j"$(nproc)" --target tgsched tgoracle tggen
for src in fuzz/targets/fuzz_*.c; do
  name=$(basename "$src" .c)
  [ "$name" = fuzz_cuda ] && continue # needs a GPU
  $CC $CFLAGS -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude/tgsched -Ioracle -Ifuzz/gen -Iimpl "$src" \
    build-cfl/libtggen.a build-cfl/libtgoracle.a build-cfl/libtgsched.a $LIB_FUZZING_ENGINE -lpthread -lm \
    -o "$OUT/$name"
  if [ -f "fuzz/options/$name.options" ]; then cp "fuzz/options/$name.options" "$OUT/"; fi
  if [ -d "corpus/$name" ]; then (cd "corpus/$name" && zip -q -r "$OUT/${name}_seed_corpus.zip" .); fi
done
cp fuzz/tg.dict "$OUT/fuzz_tg_read.dict"
