/* bars.c — a bar chart of groups: the mean as a bar, ±sd as an error bar, every value as a
 * dot spread across its bar (so equal values stay visible), the mean written above. */
#include "s2s/viz.h"

#include <math.h>
#include <stdio.h>

S2sStatus bars_write_png(const char *path, const BarChart *b, Font *font, S2sError *err) {
    S2S_ASSERT(b->n >= 0 && b->n <= BARS_MAX_GROUPS);
    int W = 100 + 120 * b->n, H = 420, left = 60, top = 40, ph = 300;
    W = W < 460 ? 460 : W; /* room for the title */
    Image im;
    S2sStatus st = image_new(&im, W, H, (Rgb){255, 255, 255}, err);
    if (st) return st;
    double top_v = 0;
    for (int v = 0; v < b->n; v++) top_v = fmax(top_v, fmax(b->groups[v].max, b->groups[v].mean + b->groups[v].sd));
    top_v = top_v > 0 ? ceil(top_v / 10.0) * 10.0 : 1.0;
    const Rgb bar = {31, 119, 180}, black = {20, 20, 20};
    image_line(&im, left, top, left, top + ph, black);
    image_line(&im, left, top + ph, W - 20, top + ph, black);
    for (int k = 0; k <= 5; k++) {
        char t[16];
        snprintf(t, sizeof t, "%.0f", top_v * k / 5);
        int y = top + ph - ph * k / 5;
        image_line(&im, left - 4, y, left, y, black);
        if (font) font_draw(font, &im, left - 8 - font_width(font, 11, t), y - 7, 11, t, black, false);
    }
#define Y(v) (top + ph - (int)lround((v) / top_v * ph))
    for (int v = 0; v < b->n; v++) {
        const BarGroup *g = &b->groups[v];
        int x = left + 40 + v * 120;
        if (isfinite(g->mean)) image_fill_rect(&im, x, Y(g->mean), 60, top + ph - Y(g->mean), bar);
        if (g->n > 1 && isfinite(g->sd)) {
            image_line(&im, x + 30, Y(g->mean - g->sd), x + 30, Y(g->mean + g->sd), black);
            image_line(&im, x + 20, Y(g->mean + g->sd), x + 40, Y(g->mean + g->sd), black);
            image_line(&im, x + 20, Y(g->mean - g->sd), x + 40, Y(g->mean - g->sd), black);
        }
        int np = g->n_points;
        for (int i = 0; i < np; i++) {
            double pv = g->points[i];
            if (!isfinite(pv)) continue;
            int px = x + 30 + (np > 1 ? (int)lround(40.0 * i / (np - 1)) - 20 : 0);
            image_fill_rect(&im, px - 3, Y(pv) - 3, 7, 7, (Rgb){255, 127, 14});
            image_fill_rect(&im, px - 2, Y(pv) - 2, 5, 5, (Rgb){255, 187, 120});
        }
        if (font) {
            font_draw(font, &im, x + 30 - font_width(font, 12, g->label) / 2, top + ph + 8, 12, g->label, black, false);
            char t[32];
            snprintf(t, sizeof t, "%.2f", g->mean);
            double above = fmax(g->max, g->mean + (g->n > 1 ? g->sd : 0.0)); /* clear of the dots and the bar */
            font_draw(font, &im, x + 30 - font_width(font, 11, t) / 2, Y(above) - 20, 11, t, black, false);
        }
    }
#undef Y
    if (font && b->title) font_draw(font, &im, left, 10, 14, b->title, black, false);
    st = png_write(path, &im, err);
    image_free(&im);
    return st;
}
