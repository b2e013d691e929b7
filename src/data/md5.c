// md5: RFC 1321, only to check downloaded files against their published sums.
#include "hw/data.h"
#include "hw/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    uint32_t state[4];
    uint64_t bytes;         // message length so far
    uint8_t block[64];      // the partial block, bytes % 64 of it used
} md5_ctx;

// Per-round shift amounts and the constants floor(abs(sin(i + 1)) * 2^32) of the RFC.
static const uint8_t md5_shift[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
    5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
};

static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static uint32_t rotl(uint32_t x, int s) { return (x << s) | (x >> (32 - s)); }

static void md5_block(uint32_t state[4], const uint8_t *p) {
    uint32_t m[16];
    for (int i = 0; i < 16; i++) {
        m[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        uint32_t next_b = b + rotl(a + f + md5_k[i] + m[g], md5_shift[i]);
        a = d;
        d = c;
        c = b;
        b = next_b;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
}

static void md5_init(md5_ctx *ctx) {
    ctx->state[0] = 0x67452301;
    ctx->state[1] = 0xefcdab89;
    ctx->state[2] = 0x98badcfe;
    ctx->state[3] = 0x10325476;
    ctx->bytes = 0;
}

static void md5_update(md5_ctx *ctx, const uint8_t *data, size_t len) {
    size_t used = (size_t)(ctx->bytes % 64);
    ctx->bytes += len;
    if (used) {
        size_t take = 64 - used < len ? 64 - used : len;
        memcpy(ctx->block + used, data, take);
        data += take;
        len -= take;
        if (used + take < 64) return;
        md5_block(ctx->state, ctx->block);
    }
    for (; len >= 64; data += 64, len -= 64) md5_block(ctx->state, data);
    memcpy(ctx->block, data, len);
}

static void md5_final_hex(md5_ctx *ctx, char hex[33]) {
    uint64_t bits = ctx->bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t used = (size_t)(ctx->bytes % 64);
    size_t pad_len = used < 56 ? 56 - used : 120 - used;
    for (int i = 0; i < 8; i++) pad[pad_len + (size_t)i] = (uint8_t)(bits >> (8 * i));
    md5_update(ctx, pad, pad_len + 8);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        uint8_t byte = (uint8_t)(ctx->state[i / 4] >> (8 * (i % 4)));
        hex[2 * i] = digits[byte >> 4];
        hex[2 * i + 1] = digits[byte & 15];
    }
    hex[32] = '\0';
}

void hw_md5_hex(const void *data, size_t len, char hex[33]) {
    md5_ctx ctx;
    md5_init(&ctx);
    md5_update(&ctx, data, len);
    md5_final_hex(&ctx, hex);
}

int hw_md5_file(const char *path, char hex[33]) {
    FILE *f = fopen(path, "rb");
    if (!f) return hw_fail_errno(errno, "cannot open %s", path);
    md5_ctx ctx;
    md5_init(&ctx);
    static _Thread_local uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) md5_update(&ctx, buf, n);
    int failed = ferror(f), saved_errno = errno;
    fclose(f);
    if (failed) return hw_fail_errno(saved_errno, "cannot read %s", path);
    md5_final_hex(&ctx, hex);
    return HW_OK;
}
