/* .npz tensor files: numpy's zip of .npy arrays (np.savez stores them, np.savez_compressed
 * deflates them; both write zip64 fields). The central directory is read (it has the sizes even
 * when a local header defers them), every offset and size is checked against the file, and the
 * chosen member is decoded by ir_npy_read_mem. A member "x.npy" is the array "x".
 */
#include "validate/validate.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define ZIP_EOCD 0x06054b50u
#define ZIP_CDIR 0x02014b50u
#define ZIP_LOCAL 0x04034b50u
#define ZIP_MAX_MEMBERS 4096

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

typedef struct NpzMember {
    const char *name; /* into the file's bytes, not terminated */
    size_t name_len;
    uint32_t method;
    uint64_t csize, usize, offset;
} NpzMember;

bool ir_npz_is(const void *data, size_t len) { return len >= 4 && rd32(data) == ZIP_LOCAL; }

/* The zip64 extended field (id 1) replaces each 32-bit field that reads 0xFFFFFFFF, in order. */
static void zip64_fields(const unsigned char *ex, size_t elen, NpzMember *m, bool u, bool c, bool o) {
    for (size_t i = 0; i + 4 <= elen;) {
        uint32_t id = rd16(ex + i), sz = rd16(ex + i + 2);
        if (i + 4 + sz > elen) return;
        if (id == 1) {
            const unsigned char *f = ex + i + 4, *end = f + sz;
            if (u && f + 8 <= end) m->usize = rd64(f), f += 8;
            if (c && f + 8 <= end) m->csize = rd64(f), f += 8;
            if (o && f + 8 <= end) m->offset = rd64(f);
            return;
        }
        i += 4 + sz;
    }
}

static IrStatus list_members(const unsigned char *b, size_t len, const char *path, IrDiag *diag, NpzMember *ms,
                             uint32_t *n) {
    *n = 0;
    size_t eocd = 0;
    bool found = false;
    for (size_t back = 22; back <= len && back <= 22 + 65535; back++)
        if (rd32(b + len - back) == ZIP_EOCD) { eocd = len - back; found = true; break; }
    if (!found) {
        ir_diag_error(diag, "%s: not a .npz file (no zip directory at its end; truncated?)", path);
        return IR_ESYNTAX;
    }
    uint64_t count = rd16(b + eocd + 10), cdir = rd32(b + eocd + 16);
    if (cdir == 0xFFFFFFFFu || count == 0xFFFFu) { /* zip64: the locator sits just before */
        if (eocd < 20 || rd32(b + eocd - 20) != 0x07064b50u) goto bad;
        uint64_t z = rd64(b + eocd - 20 + 8);
        if (z > len - 56 || rd32(b + z) != 0x06064b50u) goto bad;
        count = rd64(b + z + 32);
        cdir = rd64(b + z + 48);
    }
    if (count > ZIP_MAX_MEMBERS) goto bad;
    size_t p = (size_t)cdir;
    for (uint64_t i = 0; i < count; i++) {
        if (p > len || len - p < 46 || rd32(b + p) != ZIP_CDIR) goto bad;
        NpzMember *m = &ms[*n];
        uint32_t nlen = rd16(b + p + 28), elen = rd16(b + p + 30), clen = rd16(b + p + 32);
        if (len - p - 46 < (size_t)nlen + elen + clen) goto bad;
        m->method = rd16(b + p + 10);
        m->csize = rd32(b + p + 20);
        m->usize = rd32(b + p + 24);
        m->offset = rd32(b + p + 42);
        m->name = (const char *)b + p + 46;
        m->name_len = nlen;
        zip64_fields(b + p + 46 + nlen, elen, m, m->usize == 0xFFFFFFFFu, m->csize == 0xFFFFFFFFu,
                     m->offset == 0xFFFFFFFFu);
        (*n)++;
        p += 46 + (size_t)nlen + elen + clen;
    }
    return IR_OK;
bad:
    ir_diag_error(diag, "%s: not a valid .npz file (its zip directory is damaged)", path);
    return IR_ESYNTAX;
}

/* The member's bytes, inflated when deflated; malloc'd. */
static IrStatus member_bytes(const unsigned char *b, size_t len, const NpzMember *m, const char *path, IrDiag *diag,
                             unsigned char **out) {
    *out = NULL;
    if (m->offset > len || len - m->offset < 30 || rd32(b + m->offset) != ZIP_LOCAL) goto bad;
    size_t data = (size_t)m->offset + 30 + rd16(b + m->offset + 26) + rd16(b + m->offset + 28);
    if (data > len || m->csize > len - data || m->usize > ((uint64_t)1 << 40)) goto bad;
    unsigned char *u = malloc(m->usize ? (size_t)m->usize : 1);
    if (!u) return IR_ENOMEM;
    if (m->method == 0) {
        if (m->csize != m->usize) { free(u); goto bad; }
        memcpy(u, b + data, (size_t)m->usize);
    } else if (m->method == 8) {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (inflateInit2(&z, -MAX_WBITS) != Z_OK) { free(u); return IR_ENOMEM; }
        int r = Z_OK;
        size_t in_left = (size_t)m->csize, out_done = 0;
        const unsigned char *in = b + data;
        while (r == Z_OK) { /* zlib counts in uInt: feed and drain in pieces */
            uInt ci = in_left > 0x40000000u ? 0x40000000u : (uInt)in_left;
            size_t room = (size_t)m->usize - out_done;
            uInt co = room > 0x40000000u ? 0x40000000u : (uInt)room;
            z.next_in = (Bytef *)in, z.avail_in = ci, z.next_out = u + out_done, z.avail_out = co;
            r = inflate(&z, Z_NO_FLUSH);
            in += ci - z.avail_in, in_left -= ci - z.avail_in, out_done += co - z.avail_out;
            if (r == Z_OK && ci == z.avail_in && co == z.avail_out) r = Z_DATA_ERROR; /* no progress */
        }
        inflateEnd(&z);
        if (r != Z_STREAM_END || out_done != m->usize) {
            free(u);
            ir_diag_error(diag, "%s: member '%.*s' does not inflate (corrupt .npz)", path, (int)m->name_len, m->name);
            return IR_ESYNTAX;
        }
    } else {
        free(u);
        ir_diag_error(diag, "%s: member '%.*s' uses zip compression method %u (only stored and deflated are read)",
                      path, (int)m->name_len, m->name, m->method);
        return IR_EUNSUPPORTED;
    }
    *out = u;
    return IR_OK;
bad:
    ir_diag_error(diag, "%s: not a valid .npz file (member '%.*s' lies outside the file)", path, (int)m->name_len,
                  m->name);
    return IR_ESYNTAX;
}

static bool member_is(const NpzMember *m, const char *name) {
    size_t n = strlen(name);
    return (m->name_len == n + 4 && memcmp(m->name, name, n) == 0 && memcmp(m->name + n, ".npy", 4) == 0) ||
           (m->name_len == n && memcmp(m->name, name, n) == 0);
}

IrStatus ir_npz_read(const char *path, const char *name, IrDiag *diag, IrTensor *out) {
    memset(out, 0, sizeof *out);
    char *data;
    size_t len;
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    const unsigned char *b = (const unsigned char *)data;
    NpzMember *ms = calloc(ZIP_MAX_MEMBERS, sizeof *ms);
    uint32_t n = 0;
    s = ms ? list_members(b, len, path, diag, ms, &n) : IR_ENOMEM;
    const NpzMember *pick = NULL;
    for (uint32_t i = 0; !s && name && i < n && !pick; i++)
        if (member_is(&ms[i], name)) pick = &ms[i];
    if (!s && !pick && n == 1) pick = &ms[0];
    if (!s && !pick) {
        IrStrBuf list;
        ir_strbuf_init(&list);
        for (uint32_t i = 0; i < n && i < 32; i++) {
            size_t l = ms[i].name_len >= 4 && memcmp(ms[i].name + ms[i].name_len - 4, ".npy", 4) == 0 ? ms[i].name_len - 4
                                                                                                   : ms[i].name_len;
            ir_strbuf_printf(&list, "%s'%.*s'", i ? ", " : "", (int)l, ms[i].name);
        }
        if (n == 0) ir_diag_error(diag, "%s: the .npz file holds no arrays", path);
        else if (name)
            ir_diag_error(diag, "%s: no array named '%s' in this .npz (it holds %s): name the input after one of them",
                          path, name, list.data ? list.data : "");
        else
            ir_diag_error(diag, "%s: the .npz holds %u arrays (%s): say which with --input NAME=%s", path, n,
                          list.data ? list.data : "", path);
        ir_strbuf_free(&list);
        s = IR_ENOTFOUND;
    }
    unsigned char *bytes = NULL;
    if (!s) s = member_bytes(b, len, pick, path, diag, &bytes);
    if (!s) {
        IrStrBuf label;
        ir_strbuf_init(&label);
        ir_strbuf_printf(&label, "%s[%.*s]", path, (int)pick->name_len, pick->name);
        s = ir_npy_read_mem(bytes, (size_t)pick->usize, label.data ? label.data : path, diag, out);
        ir_strbuf_free(&label);
    }
    free(bytes);
    free(ms);
    free(data);
    return s;
}
