/* plot.c — line plots with axes, ticks, labels and a legend (learning curves). */
#include "s2s/viz.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const Rgb WHITE = {255, 255, 255}, BLACK = {20, 20, 20}, LIGHT = {225, 225, 225};

/* A "nice" tick step (1, 2 or 5 × 10^k) for about 5 ticks over span. */
static double nice_step(double span) {
    double raw = span / 5.0, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

static void fmt(char *buf, size_t n, double v, double step) {
    int dec = step >= 1.0 ? 0 : (int)ceil(-log10(step) - 1e-9);
    snprintf(buf, n, "%.*f", dec, v);
}

S2sStatus plot_draw(Image *canvas, int ox, int oy, int W, int H, const Plot *p, Font *font, S2sError *err) {
    S2S_ASSERT(p->n >= 1 && p->n_series >= 1 && p->n_series <= PLOT_MAX_SERIES);
    int left = 70, right = 20, top = 40, bottom = 50;
    /* draw into a panel, then copy it in place */
    Image im;
    S2sStatus st = image_new(&im, W, H, WHITE, err);
    if (st) return st;
    double xmin = p->x[0], xmax = p->x[0], ymin = INFINITY, ymax = -INFINITY;
    for (int i = 0; i < p->n; i++) {
        xmin = fmin(xmin, p->x[i]);
        xmax = fmax(xmax, p->x[i]);
        for (int s = 0; s < p->n_series; s++)
            if (isfinite(p->series[s].y[i])) {
                ymin = fmin(ymin, p->series[s].y[i]);
                ymax = fmax(ymax, p->series[s].y[i]);
            }
    }
    if (!isfinite(ymin)) ymin = 0, ymax = 1;
    if (xmax == xmin) xmin -= 1, xmax += 1;
    if (ymax == ymin) ymin -= 1, ymax += 1;
    double ystep = nice_step(ymax - ymin), xstep = nice_step(xmax - xmin);
    if (xstep < 1.0 && xmax - xmin >= 1.0) xstep = 1.0; /* epochs are whole */
    ymin = floor(ymin / ystep) * ystep;
    ymax = ceil(ymax / ystep) * ystep;
    int pw = W - left - right, ph = H - top - bottom;
#define PX(v) (left + (int)lround(((v) - xmin) / (xmax - xmin) * pw))
#define PY(v) (top + ph - (int)lround(((v) - ymin) / (ymax - ymin) * ph))
    char buf[32];
    for (double v = ymin; v <= ymax + ystep * 1e-6; v += ystep) { /* grid and y ticks */
        image_line(&im, left, PY(v), left + pw, PY(v), LIGHT);
        if (font) {
            fmt(buf, sizeof buf, v, ystep);
            font_draw(font, &im, left - 8 - font_width(font, 11, buf), PY(v) - 7, 11, buf, BLACK, false);
        }
    }
    for (double v = ceil(xmin / xstep) * xstep; v <= xmax + xstep * 1e-6; v += xstep) {
        image_line(&im, PX(v), top + ph, PX(v), top + ph + 4, BLACK);
        if (font) {
            fmt(buf, sizeof buf, v, xstep);
            font_draw(font, &im, PX(v) - font_width(font, 11, buf) / 2, top + ph + 7, 11, buf, BLACK, false);
        }
    }
    image_line(&im, left, top, left, top + ph, BLACK);
    image_line(&im, left, top + ph, left + pw, top + ph, BLACK);
    for (int s = 0; s < p->n_series; s++) {
        const Series *se = &p->series[s];
        int lx = -1, ly = -1;
        for (int i = 0; i < p->n; i++) {
            if (!isfinite(se->y[i])) continue; /* the line joins the points either side */
            int x = PX(p->x[i]), y = PY(se->y[i]);
            image_fill_rect(&im, x - 2, y - 2, 5, 5, se->color);
            if (lx >= 0)
                for (int o = -1; o <= 1; o++) image_line(&im, lx, ly + o, x, y + o, se->color); /* 3 px wide */
            lx = x;
            ly = y;
        }
    }
#undef PX
#undef PY
    if (font) {
        if (p->title) font_draw(font, &im, left, 10, 15, p->title, BLACK, false);
        if (p->xlabel) font_draw(font, &im, left + pw / 2 - font_width(font, 12, p->xlabel) / 2, H - 22, 12, p->xlabel, BLACK, false);
        if (p->ylabel) font_draw(font, &im, 8, top + ph / 2 + font_width(font, 12, p->ylabel) / 2, 12, p->ylabel, BLACK, true);
        /* legend, right-aligned at the top; a row lower when it would run into the title */
        int lw = 0;
        for (int s = 0; s < p->n_series; s++) lw += font_width(font, 12, p->series[s].name) + 28;
        int tw = p->title ? font_width(font, 15, p->title) : 0, ly = left + tw + 16 > left + pw - 10 - lw ? 26 : 12;
        int lx = left + pw - 10;
        for (int s = p->n_series - 1; s >= 0; s--) {
            int w = font_width(font, 12, p->series[s].name);
            lx -= w + 28;
            image_fill_rect(&im, lx, ly + 6, 18, 4, p->series[s].color);
            font_draw(font, &im, lx + 22, ly, 12, p->series[s].name, BLACK, false);
        }
    }
    for (int y = 0; y < H && oy + y < canvas->h; y++)
        memcpy(canvas->rgb + ((size_t)(oy + y) * canvas->w + ox) * 3, im.rgb + (size_t)y * W * 3,
               (size_t)(W < canvas->w - ox ? W : canvas->w - ox) * 3);
    image_free(&im);
    return S2S_OK;
}

S2sStatus plot_write_png(const char *path, const Plot *p, Font *font, S2sError *err) {
    Image im;
    S2sStatus st = image_new(&im, 720, 420, WHITE, err);
    if (!st) st = plot_draw(&im, 0, 0, 720, 420, p, font, err);
    if (!st) st = png_write(path, &im, err);
    image_free(&im);
    return st;
}
