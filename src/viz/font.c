/* font.c — UTF-8 text through FreeType, alpha-blended onto an Image. */
#include "s2s/viz.h"

#include <ft2build.h>
#include FT_FREETYPE_H
#include <stdlib.h>
#include <string.h>

#define DEJAVU "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

struct Font {
    FT_Library lib;
    FT_Face face;
};

Font *font_open(const char *path) {
    Font *f = s2s_xcalloc(1, sizeof *f);
    if (FT_Init_FreeType(&f->lib)) {
        free(f);
        return NULL;
    }
    if (FT_New_Face(f->lib, path ? path : DEJAVU, 0, &f->face)) {
        FT_Done_FreeType(f->lib);
        free(f);
        return NULL;
    }
    return f;
}

void font_close(Font *f) {
    if (!f) return;
    FT_Done_Face(f->face);
    FT_Done_FreeType(f->lib);
    free(f);
}

/* Next code point of UTF-8 text; invalid bytes give U+FFFD and advance one byte. */
static uint32_t next_cp(const unsigned char **s) {
    const unsigned char *p = *s;
    uint32_t cp;
    int len;
    if (p[0] < 0x80) cp = p[0], len = 1;
    else if ((p[0] & 0xE0) == 0xC0) cp = p[0] & 0x1F, len = 2;
    else if ((p[0] & 0xF0) == 0xE0) cp = p[0] & 0x0F, len = 3;
    else if ((p[0] & 0xF8) == 0xF0) cp = p[0] & 0x07, len = 4;
    else {
        *s += 1;
        return 0xFFFD;
    }
    for (int k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80) {
            *s += 1;
            return 0xFFFD;
        }
        cp = cp << 6 | (p[k] & 0x3F);
    }
    *s += len;
    return cp;
}

static void blend(Image *im, int x, int y, Rgb c, uint8_t a) {
    if (x < 0 || y < 0 || x >= im->w || y >= im->h || !a) return;
    uint8_t *p = im->rgb + ((size_t)y * im->w + x) * 3;
    p[0] = (uint8_t)((p[0] * (255 - a) + c.r * a) / 255);
    p[1] = (uint8_t)((p[1] * (255 - a) + c.g * a) / 255);
    p[2] = (uint8_t)((p[2] * (255 - a) + c.b * a) / 255);
}

static int run(Font *f, Image *im, int x, int y, int px, const char *text, Rgb c, bool vertical, bool draw) {
    if (!f) return 0;
    FT_Set_Pixel_Sizes(f->face, 0, (FT_UInt)px);
    int ascender = (int)(f->face->size->metrics.ascender >> 6);
    int pen = 0;
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        uint32_t cp = next_cp(&s);
        if (FT_Load_Char(f->face, cp, draw ? FT_LOAD_RENDER : FT_LOAD_DEFAULT)) continue;
        FT_GlyphSlot g = f->face->glyph;
        if (draw) {
            const FT_Bitmap *bm = &g->bitmap;
            for (unsigned r = 0; r < bm->rows; r++)
                for (unsigned col = 0; col < bm->width; col++) {
                    uint8_t a = bm->buffer[r * (unsigned)bm->pitch + col];
                    int gx = pen + g->bitmap_left + (int)col, gy = ascender - g->bitmap_top + (int)r;
                    if (vertical) blend(im, x + gy, y - gx, c, a); /* rotated: baseline up the page */
                    else blend(im, x + gx, y + gy, c, a);
                }
        }
        pen += (int)(g->advance.x >> 6);
    }
    return pen;
}

int font_draw(Font *f, Image *im, int x, int y, int px, const char *text, Rgb c, bool vertical) {
    return run(f, im, x, y, px, text, c, vertical, true);
}

int font_width(Font *f, int px, const char *text) { return run(f, NULL, 0, 0, px, text, (Rgb){0, 0, 0}, false, false); }
