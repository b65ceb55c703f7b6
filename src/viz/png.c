/* png.c — PNG files through libpng; setjmp stays in these two functions. */
#include "s2s/viz.h"
#include "s2s/file.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

S2sStatus png_write(const char *path, const Image *im, S2sError *err) {
    FileTmp t;
    S2sStatus st = file_tmp_open(&t, path, err);
    if (st) return st;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *rows = malloc((size_t)im->h * sizeof *rows);
    if (!png || !info || !rows) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        file_tmp_abort(&t);
        return s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        file_tmp_abort(&t);
        return s2s_fail(err, S2S_ERR_IO, "%s: libpng could not write the image", path);
    }
    png_init_io(png, t.f);
    png_set_IHDR(png, info, (png_uint_32)im->w, (png_uint_32)im->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < im->h; y++) rows[y] = im->rgb + (size_t)y * im->w * 3;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    return file_tmp_commit(&t, false, err);
}

S2sStatus png_read(const char *path, Image *im, S2sError *err) {
    memset(im, 0, sizeof *im);
    FILE *f = fopen(path, "rb");
    if (!f) return s2s_fail(err, S2S_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8)) {
        fclose(f);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: not a PNG file", path);
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    /* volatile: assigned after setjmp and read after a longjmp */
    png_bytep *volatile rows = NULL;
    uint8_t *volatile px = NULL;
    if (!png || !info) {
        png_destroy_read_struct(&png, &info, NULL);
        fclose(f);
        return s2s_fail(err, S2S_ERR_NOMEM, "%s: out of memory", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(rows);
        free(px);
        fclose(f);
        return s2s_fail(err, S2S_ERR_CORRUPT, "%s: libpng could not read the image", path);
    }
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (depth != 8 || (type != PNG_COLOR_TYPE_RGB && type != PNG_COLOR_TYPE_RGBA) || w == 0 || h == 0 || w > 20000 || h > 20000)
        png_error(png, "unsupported");
    int ch = type == PNG_COLOR_TYPE_RGBA ? 4 : 3;
    px = malloc((size_t)w * h * ch);
    rows = malloc(h * sizeof *rows);
    if (!px || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = px + (size_t)y * w * ch;
    png_read_image(png, (png_bytepp)rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    free(rows);
    im->w = (int)w;
    im->h = (int)h;
    im->rgb = s2s_xmalloc((size_t)w * h * 3);
    for (size_t i = 0; i < (size_t)w * h; i++) memcpy(im->rgb + 3 * i, px + ch * i, 3);
    free(px);
    return S2S_OK;
}
