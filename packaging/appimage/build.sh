#!/usr/bin/env bash
# Wraps the one-folder app (`make bundle`) in an AppImage: the runtime built from
# runtime.c beside this script, followed by a squashfs image of the folder with the
# AppDir's own files at its top (AppRun linking to the program, the .desktop file, the
# icon and .DirIcon). Usage: packaging/appimage/build.sh APP_FOLDER OUT.AppImage
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
app=${1:?the app folder (make bundle builds it)}
out=${2:?the AppImage to write}
program=lipsync-studio
[ -x "$app/$program" ] || { echo "no $program in '$app': make bundle builds it"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Static, so the one file runs on any x86-64 Linux whatever its libraries (the libfuse3
# and squashfuse that mount the image are not on every desktop). The linker's warning
# about dlopen in static programs (libfuse's optional modules, never used here) is shown
# only if the build fails.
if ! gcc -O2 -Wall -Wextra -Werror -o "$work/runtime" "$here/runtime.c" -static \
    -l:libsquashfuse_ll.a -l:libsquashfuse.a -l:libfuse3.a \
    -lz -llzma -llzo2 -llz4 -lzstd -lpthread -ldl >"$work/gcc.log" 2>&1; then
  cat "$work/gcc.log"
  exit 1
fi

top=$work/top
mkdir "$top"
ln -s "$program" "$top/AppRun"
cp "$root/packaging/$program.desktop" "$top/"
cp "$root/assets/icons/$program-256.png" "$top/$program.png"
ln -s "$program.png" "$top/.DirIcon"
# zstd level 9: the 556 MB folder in 5.5 s to 251 MB on 2 vCPUs, where level 3 took
# 2.4 s for 263 MB and level 15 55 s for 240 MB (measured once each, 2-vCPU Xeon VM).
mksquashfs "$app"/* "$top/AppRun" "$top/.DirIcon" "$top/$program.desktop" "$top/$program.png" \
  "$work/image" -noappend -quiet -no-progress -root-owned -comp zstd -Xcompression-level 9 \
  >/dev/null
cat "$work/runtime" "$work/image" >"$work/out"
# The AppImage type 2 magic, in the ELF identification's padding.
printf 'AI\002' | dd of="$work/out" bs=1 seek=8 conv=notrunc status=none
chmod 755 "$work/out"
mkdir -p "$(dirname "$out")"
mv "$work/out" "$out"
echo "$out: $(du -m "$out" | cut -f1) MB"
