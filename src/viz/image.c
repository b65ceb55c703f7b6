/* image.c — RGB images, rectangles, lines, the colour map. */
#include "s2s/viz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

S2sStatus image_new(Image *im, int w, int h, Rgb fill, S2sError *err) {
    memset(im, 0, sizeof *im);
    if (w < 1 || h < 1 || w > IMAGE_MAX_SIDE || h > IMAGE_MAX_SIDE || (size_t)w * (size_t)h > IMAGE_MAX_PIXELS)
        return s2s_fail(err, S2S_ERR_DATA, "a picture of %d x %d pixels is too large to draw (at most %d a side)", w, h,
                        IMAGE_MAX_SIDE);
    im->rgb = malloc((size_t)w * h * 3);
    if (!im->rgb) return s2s_fail(err, S2S_ERR_NOMEM, "out of memory for a picture of %d x %d pixels", w, h);
    im->w = w;
    im->h = h;
    for (size_t i = 0; i < (size_t)w * h; i++) {
        im->rgb[3 * i] = fill.r;
        im->rgb[3 * i + 1] = fill.g;
        im->rgb[3 * i + 2] = fill.b;
    }
    return S2S_OK;
}

void image_free(Image *im) {
    free(im->rgb);
    memset(im, 0, sizeof *im);
}

static void put(Image *im, int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= im->w || y >= im->h) return;
    uint8_t *p = im->rgb + ((size_t)y * im->w + x) * 3;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
}

Rgb image_get(const Image *im, int x, int y) {
    S2S_ASSERT(x >= 0 && y >= 0 && x < im->w && y < im->h);
    const uint8_t *p = im->rgb + ((size_t)y * im->w + x) * 3;
    return (Rgb){p[0], p[1], p[2]};
}

void image_fill_rect(Image *im, int x, int y, int w, int h, Rgb c) {
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) put(im, i, j, c);
}

void image_line(Image *im, int x0, int y0, int x1, int y1, Rgb c) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) { /* Bresenham */
        put(im, x0, y0, c);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

/* A few stops of matplotlib's "viridis", linearly interpolated: dark blue → yellow. */
Rgb viz_colormap(float v) {
    static const uint8_t STOPS[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                        {39, 173, 129}, {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
    if (!(v >= 0.0f)) v = 0.0f; /* NaN too */
    if (v > 1.0f) v = 1.0f;
    float p = v * 8.0f;
    int i = (int)p;
    if (i >= 8) i = 7;
    float f = p - (float)i;
    Rgb c;
    c.r = (uint8_t)lrintf(STOPS[i][0] + f * (STOPS[i + 1][0] - STOPS[i][0]));
    c.g = (uint8_t)lrintf(STOPS[i][1] + f * (STOPS[i + 1][1] - STOPS[i][1]));
    c.b = (uint8_t)lrintf(STOPS[i][2] + f * (STOPS[i + 1][2] - STOPS[i][2]));
    return c;
}
