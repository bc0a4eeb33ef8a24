/* Diagnostics sinks, string buffers and file helpers (atomic writes, whole-file reads).
 *
 * The library reports through an IrDiag; the standard sink formats `file:line:col: error: msg`
 * with the source line and a caret, the way compilers do. Only the sink decides where text goes.
 */
#include "ir_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- string buffer ------------------------------------------------------------------------- */

void ir_strbuf_init(IrStrBuf *b) { memset(b, 0, sizeof *b); }
void ir_strbuf_free(IrStrBuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static bool strbuf_grow(IrStrBuf *b, size_t extra) {
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + extra + 1) {
        if (ncap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        ncap *= 2;
    }
    char *p = realloc(b->data, ncap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = ncap;
    return true;
}

void ir_strbuf_append(IrStrBuf *b, const char *s, size_t n) {
    if (!strbuf_grow(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}
void ir_strbuf_puts(IrStrBuf *b, const char *s) { ir_strbuf_append(b, s, strlen(s)); }
void ir_strbuf_putc(IrStrBuf *b, char c) {
    if (!strbuf_grow(b, 1)) return;
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

static void strbuf_vprintf(IrStrBuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof tmp) {
        ir_strbuf_append(b, tmp, (size_t)n);
    } else if (strbuf_grow(b, (size_t)n)) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void ir_strbuf_printf(IrStrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* ---- diagnostics --------------------------------------------------------------------------- */

void ir_diag_init(IrDiag *d, IrDiagFn fn, void *user) {
    memset(d, 0, sizeof *d);
    d->fn = fn;
    d->user = user;
}

static const char *sev_name(IrSeverity s) {
    return s == IR_SEV_ERROR ? "error" : s == IR_SEV_WARNING ? "warning" : "note";
}

static void format_diag(IrStrBuf *b, const IrDiagnostic *d) {
    if (d->file) {
        ir_strbuf_puts(b, d->file);
        if (d->line) ir_strbuf_printf(b, ":%u", d->line);
        if (d->line && d->col) ir_strbuf_printf(b, ":%u", d->col);
        ir_strbuf_puts(b, ": ");
    }
    ir_strbuf_printf(b, "%s: %s\n", sev_name(d->severity), d->message);
    if (d->source_line && d->col) {
        size_t n = d->source_line_len;
        if (n > 400) n = 400; /* keep pathological lines readable */
        ir_strbuf_puts(b, "  ");
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)d->source_line[i];
            ir_strbuf_putc(b, (c < 0x20 && c != '\t') ? ' ' : (char)c);
        }
        ir_strbuf_puts(b, "\n  ");
        for (uint32_t i = 1; i < d->col && i <= n; i++)
            ir_strbuf_putc(b, d->source_line[i - 1] == '\t' ? '\t' : ' ');
        ir_strbuf_puts(b, "^\n");
    }
}

void ir_diag_print_fn(void *user, const IrDiagnostic *d) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    format_diag(&b, d);
    if (b.data) fputs(b.data, user ? (FILE *)user : stderr);
    ir_strbuf_free(&b);
}

void ir_diag_buffer_fn(void *user, const IrDiagnostic *d) { format_diag((IrStrBuf *)user, d); }

static void diag_vreport(IrDiag *d, IrSeverity sev, const char *file, uint32_t line, uint32_t col,
                         const char *src, size_t src_len, const char *fmt, va_list ap) {
    if (!d) return;
    if (sev == IR_SEV_ERROR) {
        d->n_errors++;
        if (d->max_errors && d->n_errors > d->max_errors) return;
    } else if (sev == IR_SEV_WARNING) {
        d->n_warnings++;
    }
    if (!d->fn) return;
    IrStrBuf msg;
    ir_strbuf_init(&msg);
    strbuf_vprintf(&msg, fmt, ap);
    IrDiagnostic dg = {sev, file, line, col, msg.data ? msg.data : "(out of memory)", src, src_len};
    d->fn(d->user, &dg);
    ir_strbuf_free(&msg);
}

void ir_diag_report(IrDiag *d, IrSeverity sev, const char *file, uint32_t line, uint32_t col,
                    const char *src, size_t src_len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(d, sev, file, line, col, src, src_len, fmt, ap);
    va_end(ap);
}

void ir_diag_error(IrDiag *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(d, IR_SEV_ERROR, NULL, 0, 0, NULL, 0, fmt, ap);
    va_end(ap);
}

/* ---- files --------------------------------------------------------------------------------- */

IrFormat ir_format_from_path(const char *path) {
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return IR_FORMAT_UNKNOWN;
    if (strcmp(dot, ".ir") == 0) return IR_FORMAT_TEXT;
    if (strcmp(dot, ".irb") == 0) return IR_FORMAT_BINARY;
    if (strcmp(dot, ".onnx") == 0) return IR_FORMAT_ONNX;
    if (strcmp(dot, ".irx") == 0) return IR_FORMAT_ARTIFACT;
    return IR_FORMAT_UNKNOWN;
}

IrStatus ir_read_file(const char *path, IrDiag *diag, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    bool is_stdin = strcmp(path, "-") == 0;
    int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot open: %s", strerror(errno));
        return IR_EIO;
    }
    struct stat st;
    if (!is_stdin && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "is a directory");
        return IR_EIO;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        if (n + 1 >= cap) {
            char *p = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!p) goto oom;
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR) continue;
            ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "read failed: %s", strerror(errno));
            free(buf);
            if (!is_stdin) close(fd);
            return IR_EIO;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    if (!is_stdin) close(fd);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return IR_OK;
oom:
    free(buf);
    if (!is_stdin) close(fd);
    ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "out of memory reading file");
    return IR_ENOMEM;
}

static bool write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return true;
}

/* The temporary beside target that this write will use, created or taken over, locked (flock)
 * for as long as the write holds it: TARGET.tmp.irtool.N for the first N in 0..7 that is free
 * or stale (no writer holds its lock: the one that made it was killed), else a fresh
 * TARGET.tmp.irtool.XXXXXX. A stale file is taken over only while it is still at its name (a
 * writer that finished has renamed it onto its target). -1 with errno when none can be made. */
static int open_temp(const char *target, char *tmp, size_t cap) {
    for (int n = 0; n < 8; n++) {
        snprintf(tmp, cap, "%s.tmp.irtool.%d", target, n);
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        bool fresh = fd >= 0;
        if (fd < 0 && errno != EEXIST) return -1;
        if (fd < 0) fd = open(tmp, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat a, b;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 && lstat(tmp, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev && S_ISREG(a.st_mode) && a.st_nlink == 1 && (fresh || ftruncate(fd, 0) == 0))
            return fd;
        close(fd);
    }
    snprintf(tmp, cap, "%s.tmp.irtool.XXXXXX", target);
    int fd = mkstemp(tmp);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        unlink(tmp);
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

IrStatus ir_write_file_atomic(const char *path, const void *data, size_t len, IrDiag *diag) {
    if (strcmp(path, "-") == 0) {
        if (!write_all(1, data, len)) {
            ir_diag_report(diag, IR_SEV_ERROR, "<stdout>", 0, 0, NULL, 0, "write failed: %s", strerror(errno));
            return IR_EIO;
        }
        return IR_OK;
    }
    /* a symlink is written through: the file it names is replaced, the link stays */
    struct stat st;
    char *target = lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(path, NULL) : strdup(path);
    if (!target) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot resolve the symlink: %s", strerror(errno));
        return errno == ENOMEM ? IR_ENOMEM : IR_EIO;
    }
    bool exists = stat(target, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) { /* /dev/null, a FIFO, a terminal: written in place, never replaced */
        int fd = S_ISDIR(st.st_mode) ? -1 : open(target, O_WRONLY | O_CLOEXEC);
        bool ok = fd >= 0 && write_all(fd, data, len);
        int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
        if (fd >= 0 && close(fd) != 0 && ok) ok = false, err = errno;
        if (!ok) ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "write failed: %s", strerror(err));
        free(target);
        return ok ? IR_OK : IR_EIO;
    }
    /* an existing file keeps its permission bits; a new one gets the umask's */
    mode_t um = umask(0);
    umask(um);
    mode_t mode = exists ? st.st_mode & 07777 : 0666 & ~um;
    size_t cap = strlen(target) + 32;
    char *tmp = malloc(cap);
    int fd = tmp ? open_temp(target, tmp, cap) : -1;
    if (fd < 0) {
        int err = tmp ? errno : ENOMEM;
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot create temporary file: %s", strerror(err));
        free(tmp);
        free(target);
        return err == ENOMEM ? IR_ENOMEM : IR_EIO;
    }
    bool ok = write_all(fd, data, len) && fchmod(fd, mode) == 0 && fsync(fd) == 0;
    int err = errno;
    /* renamed while still locked, so no other writer can take the file over in between */
    if (ok && rename(tmp, target) != 0) ok = false, err = errno;
    if (!ok) unlink(tmp);
    if (close(fd) != 0 && ok) ok = false, err = errno; /* (renamed already: the data was fsynced) */
    if (!ok) ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "write failed: %s", strerror(err));
    free(tmp);
    free(target);
    return ok ? IR_OK : IR_EIO;
}

/* Optimal string alignment distance, case-insensitive; stops early above `limit`. */
static size_t osa_distance(const char *a, const char *b, size_t limit) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return limit + 1;
    if ((la > lb ? la - lb : lb - la) > limit) return limit + 1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            char x = (char)tolower((unsigned char)a[i - 1]), y = (char)tolower((unsigned char)b[j - 1]);
            size_t best = d[i - 1][j - 1] + (x != y);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && x == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == y &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *ir_suggest(const char *word, const char *const *names, size_t n) {
    if (!word || !*word) return NULL;
    size_t len = strlen(word);
    size_t limit = len <= 3 ? 1 : len <= 7 ? 2 : 3;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        size_t d = osa_distance(word, names[i], limit);
        /* a prefix ("kind" for "kinds", "comp" for "compile") is a likely slip too */
        if (d > limit && strlen(names[i]) > len && strncasecmp(names[i], word, len) == 0 && len >= 3) d = limit;
        if (d < best_d) { best_d = d; best = names[i]; }
    }
    return best;
}
