/* The AppImage runtime of Lipsync Studio: the ELF at the start of
 * LipsyncStudio-x86_64.AppImage, followed by a squashfs image of the app's folder.
 *
 * Written for this project because the AppImage project's runtime and appimagetool are
 * published only as GitHub release files, which neither this project's build machines nor
 * its CI can reach (docs/packaging.md); Debian ships what a runtime is made of: squashfuse's
 * library (reading the image in place, as a FUSE file system) and libfuse3, both linked in
 * statically so the file runs on any x86-64 Linux with FUSE.
 *
 * It follows the AppImage type 2 format (magic "AI\x02" at byte 8, the image at the end of
 * the ELF's section headers) and its runtime's interface:
 *   FILE [ARGS...]                   mount the image read-only on /tmp/.mount_*, run its
 *                                    AppRun with ARGS, unmount when that exits (its status)
 *   FILE --appimage-extract-and-run [ARGS...]   (or APPIMAGE_EXTRACT_AND_RUN=1) the same
 *                                    from a copy in a temporary folder, for machines without
 *                                    FUSE; the copy is removed after
 *   FILE --appimage-extract          the contents into ./squashfs-root
 *   FILE --appimage-mount            mount, print the mount point, wait until interrupted
 *   FILE --appimage-offset           where the image starts
 *   FILE --appimage-help
 * AppRun gets APPIMAGE (this file), APPDIR (the mount point), ARGV0 and OWD (the folder it
 * was started from), as the AppImage runtime sets them.
 *
 * Invariant: the mount lives as long as the program started from it, and at most 0.5 s
 * more. The runtime stays the FUSE server in the foreground; the program is its child;
 * SIGCHLD ends the server's loop, which unmounts (lazily: a process the program left
 * behind keeps what it has open). SIGINT from a terminal reaches both (one process group):
 * the runtime ignores it and waits for the program to exit; SIGTERM and SIGHUP sent to the
 * runtime alone are passed on to the program.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define _GNU_SOURCE
#include <squashfuse/ll.h>
#include <squashfuse/traverse.h>
#include <squashfuse/util.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *self_path;   /* this AppImage, as /proc/self/exe names it */
static size_t image_offset;     /* where the squashfs image starts in it */
static volatile pid_t child;    /* the program run from the image */
static struct fuse_session *session;

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    return 1;
}

/* Where the ELF ends: its section header table is the last thing in it. */
static int find_offset(void) {
    Elf64_Ehdr header;
    FILE *f = fopen(self_path, "rb");
    if (!f) return fail(self_path);
    size_t got = fread(&header, 1, sizeof header, f);
    fclose(f);
    if (got != sizeof header || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS64) {
        fprintf(stderr, "%s: not a 64-bit ELF file\n", self_path);
        return 1;
    }
    image_offset = header.e_shoff + (size_t)header.e_shentsize * header.e_shnum;
    return 0;
}

/* The environment AppRun expects, then AppRun itself; returns only on failure. */
static void run_app(const char *appdir, int argc, char **argv) {
    char apprun[PATH_MAX], cwd[PATH_MAX];
    snprintf(apprun, sizeof apprun, "%s/AppRun", appdir);
    setenv("APPIMAGE", self_path, 1);
    setenv("APPDIR", appdir, 1);
    setenv("ARGV0", argv[0], 1);
    if (getcwd(cwd, sizeof cwd)) setenv("OWD", cwd, 1);
    char **args = calloc((size_t)argc + 1, sizeof *args);
    args[0] = apprun;
    for (int i = 1; i < argc; i++) args[i] = argv[i];
    execv(apprun, args);
    fprintf(stderr, "cannot run %s: %s\n", apprun, strerror(errno));
}

static void pass_on(int sig) {
    if (child > 0) kill(child, sig);
}

/* AppRun from `appdir` in a child process; the runtime passes SIGTERM and SIGHUP on to it
 * and ignores the terminal's SIGINT, which reaches the child too. -1 (said why) if it
 * cannot start. */
static pid_t start_child(const char *appdir, int argc, char **argv) {
    struct sigaction handler;
    memset(&handler, 0, sizeof handler);
    sigemptyset(&handler.sa_mask);
    handler.sa_handler = pass_on;
    handler.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &handler, NULL);
    sigaction(SIGHUP, &handler, NULL);
    signal(SIGINT, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        run_app(appdir, argc, argv);
        _exit(127);
    }
    if (pid < 0) fprintf(stderr, "cannot start the program: %s\n", strerror(errno));
    child = pid;
    return pid;
}

/* The child's exit status, as a shell gives it (128 + the signal that ended it). */
static int wait_child(void) {
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static volatile sig_atomic_t child_done;

/* The FUSE loop is to end: at SIGCHLD, at SIGALRM once the child has ended, at SIGINT,
 * SIGTERM or SIGHUP for --appimage-mount (installed whether or not the signal was ignored,
 * as it is for a job started in the background). fuse_session_exit sets a flag: safe here. */
static void stop_serving(int sig) {
    if (sig == SIGCHLD) child_done = 1;
    if ((sig != SIGALRM || child_done) && session) fuse_session_exit(session);
}

/* Serve the image on a fresh /tmp/.mount_* folder; with argv, run AppRun from it as a
 * child and stop serving when it exits; without, serve until interrupted. */
static int mount_and_run(int argc, char **argv, int run) {
    struct fuse_lowlevel_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.getattr = sqfs_ll_op_getattr;
    ops.opendir = sqfs_ll_op_opendir;
    ops.releasedir = sqfs_ll_op_releasedir;
    ops.readdir = sqfs_ll_op_readdir;
    ops.lookup = sqfs_ll_op_lookup;
    ops.open = sqfs_ll_op_open;
    ops.create = sqfs_ll_op_create;
    ops.release = sqfs_ll_op_release;
    ops.read = sqfs_ll_op_read;
    ops.readlink = sqfs_ll_op_readlink;
    ops.listxattr = sqfs_ll_op_listxattr;
    ops.getxattr = sqfs_ll_op_getxattr;
    ops.forget = sqfs_ll_op_forget;
    ops.statfs = stfs_ll_op_statfs;

    sqfs_ll *ll = sqfs_ll_open(self_path, image_offset);
    if (!ll) {
        fprintf(stderr, "%s: no squashfs image at byte %zu\n", self_path, image_offset);
        return 1;
    }
    const char *base = strrchr(self_path, '/');
    char mountpoint[PATH_MAX];
    snprintf(mountpoint, sizeof mountpoint, "/tmp/.mount_%.6sXXXXXX", base ? base + 1 : "app");
    if (!mkdtemp(mountpoint)) return fail("cannot make a mount point in /tmp");

    char *fuse_argv[] = {argv[0], "-o", "ro", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
    sqfs_ll_chan channel;
    if (sqfs_ll_mount(&channel, mountpoint, &args, &ops, sizeof ops, ll) != SQFS_OK) {
        rmdir(mountpoint);
        fprintf(stderr,
                "Cannot mount the AppImage (FUSE is missing or not allowed here: the fuse3 "
                "package, /dev/fuse and fusermount3). Run it with --appimage-extract-and-run, "
                "or set APPIMAGE_EXTRACT_AND_RUN=1.\n");
        return 1;
    }
    session = channel.session;

    struct sigaction stop;
    memset(&stop, 0, sizeof stop);
    sigemptyset(&stop.sa_mask);
    stop.sa_handler = stop_serving;  /* no SA_RESTART: the loop's read returns EINTR */
    if (run) {
        sigaction(SIGCHLD, &stop, NULL);
        /* A SIGCHLD between the loop's check of its exit flag and its next read would
         * leave it waiting for a request that never comes: a timer wakes the read twice
         * a second, so the loop sees the flag within 0.5 s of the program's end. */
        sigaction(SIGALRM, &stop, NULL);
        struct itimerval tick = {{0, 500000}, {0, 500000}};
        setitimer(ITIMER_REAL, &tick, NULL);
        if (start_child(mountpoint, argc, argv) < 0) fuse_session_exit(session);
    } else {
        printf("%s\n", mountpoint);
        fflush(stdout);
        sigaction(SIGINT, &stop, NULL);
        sigaction(SIGTERM, &stop, NULL);
        sigaction(SIGHUP, &stop, NULL);
    }
    fuse_session_loop(session);

    int code = 0;  /* --appimage-mount: stopped as asked */
    if (child > 0) code = wait_child();
    else if (child < 0) code = 1;
    sqfs_ll_destroy(ll);
    sqfs_ll_unmount(&channel, mountpoint);
    free(ll);
    rmdir(mountpoint);
    return code;
}

/* Copy the image's contents into `target` (which must not hold them already). */
static int extract(const char *target) {
    sqfs fs;
    if (sqfs_open_image(&fs, self_path, image_offset) != SQFS_OK) {
        fprintf(stderr, "%s: no squashfs image at byte %zu\n", self_path, image_offset);
        return 1;
    }
    if (mkdir(target, 0755) != 0 && errno != EEXIST) return fail(target);
    sqfs_traverse walk;
    sqfs_err err = sqfs_traverse_open(&walk, &fs, sqfs_inode_root(&fs));
    static char buffer[1 << 20];
    int failed = err != SQFS_OK;
    while (!failed && sqfs_traverse_next(&walk, &err)) {
        if (walk.dir_end) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", target, walk.path);
        sqfs_inode inode;
        if (sqfs_inode_get(&fs, &inode, walk.entry.inode) != SQFS_OK) {
            fprintf(stderr, "%s: unreadable in the image\n", walk.path);
            failed = 1;
            break;
        }
        mode_t mode = inode.base.mode & 07777;
        if (S_ISDIR(inode.base.mode)) {
            if (mkdir(path, mode | 0700) != 0 && errno != EEXIST) failed = fail(path);
        } else if (S_ISLNK(inode.base.mode)) {
            char link[PATH_MAX];
            size_t size = sizeof link;
            if (sqfs_readlink(&fs, &inode, link, &size) != SQFS_OK || symlink(link, path) != 0)
                failed = fail(path);
        } else if (S_ISREG(inode.base.mode)) {
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode | 0600);
            if (fd < 0) {
                failed = fail(path);
                break;
            }
            for (sqfs_off_t at = 0; at < (sqfs_off_t)inode.xtra.reg.file_size && !failed;) {
                sqfs_off_t size = sizeof buffer;
                if (sqfs_read_range(&fs, &inode, at, &size, buffer) != SQFS_OK) {
                    fprintf(stderr, "%s: unreadable in the image\n", walk.path);
                    failed = 1;
                } else if (write(fd, buffer, (size_t)size) != (ssize_t)size) {
                    failed = fail(path);
                }
                at += size;
            }
            if (fchmod(fd, mode) != 0 || close(fd) != 0) failed = fail(path);
        }
        /* Devices, fifos and sockets have no place in an app's folder: left out. */
    }
    if (err != SQFS_OK && !failed) {
        fprintf(stderr, "%s: the image is damaged\n", self_path);
        failed = 1;
    }
    sqfs_traverse_close(&walk);
    sqfs_destroy(&fs);
    return failed;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static int extract_and_run(int argc, char **argv) {
    char target[PATH_MAX];
    const char *tmp = getenv("TMPDIR");
    snprintf(target, sizeof target, "%s/appimage_extracted_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(target)) return fail("cannot make a folder to extract into");
    int code = 1;
    if (extract(target) == 0 && start_child(target, argc, argv) > 0) code = wait_child();
    nftw(target, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return code;
}

/* argv without element i: the runtime's own option is not passed to the program. */
static void drop_arg(int *argc, char **argv, int i) {
    memmove(argv + i, argv + i + 1, (size_t)(*argc - i) * sizeof *argv);
    (*argc)--;
}

int main(int argc, char **argv) {
    static char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return fail("/proc/self/exe");
    self[n] = '\0';
    self_path = self;
    if (find_offset() != 0) return 1;

    const char *option = argc > 1 && strncmp(argv[1], "--appimage-", 11) == 0 ? argv[1] : NULL;
    if (option && strcmp(option, "--appimage-offset") == 0) {
        printf("%zu\n", image_offset);
        return 0;
    }
    if (option && strcmp(option, "--appimage-extract") == 0) {
        if (extract("squashfs-root") != 0) return 1;
        printf("squashfs-root\n");
        return 0;
    }
    if (option && strcmp(option, "--appimage-mount") == 0) return mount_and_run(argc, argv, 0);
    if (option && strcmp(option, "--appimage-extract-and-run") == 0) {
        drop_arg(&argc, argv, 1);
        return extract_and_run(argc, argv);
    }
    if (option) {
        if (strcmp(option, "--appimage-help") != 0)
            fprintf(stderr, "unknown option %s\n\n", option);
        fprintf(stderr,
                "This AppImage's own options (any other arguments go to the app):\n"
                "  --appimage-extract            copy the contents into ./squashfs-root\n"
                "  --appimage-extract-and-run    run from a temporary copy (no FUSE needed;\n"
                "                                or set APPIMAGE_EXTRACT_AND_RUN=1)\n"
                "  --appimage-mount              mount, print where, wait for Ctrl-C\n"
                "  --appimage-offset             where the squashfs image starts\n"
                "  --appimage-help               this text\n");
        return strcmp(option, "--appimage-help") == 0 ? 0 : 2;
    }
    const char *env = getenv("APPIMAGE_EXTRACT_AND_RUN");
    if (env && strcmp(env, "1") == 0) return extract_and_run(argc, argv);
    return mount_and_run(argc, argv, 1);
}
