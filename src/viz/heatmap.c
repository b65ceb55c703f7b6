/* heatmap.c — attention heatmaps: output tokens down, source tokens across, a colour scale. */
#include "s2s/viz.h"

#include <limits.h>
#include <stdio.h>

static const Rgb WHITE = {255, 255, 255}, BLACK = {20, 20, 20}, GREY = {90, 90, 90};

static int font_px(int cell) { return cell * 11 / 20 < 9 ? 9 : cell * 11 / 20 > 14 ? 14 : cell * 11 / 20; }

HeatmapLayout heatmap_layout(const Heatmap *hm, Font *font) {
    int longest = hm->rows > hm->cols ? hm->rows : hm->cols;
    /* cells shrink with the longest side to 6 pixels (labels still fit), and past 1000 tokens
     * down to one pixel without labels; image_new refuses what is still too large */
    int cell = longest <= 40 ? 24 : 960 / longest;
    if (cell < 6) cell = longest <= 1000 ? 6 : 6000 / longest > 1 ? 6000 / longest : 1;
    if (cell < 6) font = NULL;
    int px = font_px(cell), label_w = 0, label_h = 0, title_h = 0;
    if (font) {
        for (int i = 0; hm->row_labels && i < hm->rows; i++) {
            int w = font_width(font, px, hm->row_labels[i]);
            label_w = w > label_w ? w : label_w;
        }
        for (int j = 0; hm->col_labels && j < hm->cols; j++) {
            int w = font_width(font, px, hm->col_labels[j]);
            label_h = w > label_h ? w : label_h;
        }
        label_w += label_w ? 8 : 0;
        label_h += label_h ? 8 : 0;
        title_h = hm->title ? 26 : 0;
    }
    HeatmapLayout L;
    L.cell = cell;
    L.x0 = 12 + label_w;
    L.y0 = 10 + title_h + label_h;
    L.width = L.x0 + hm->cols * cell + 20 + 16 + (font ? 44 : 0) + 10;
    L.height = L.y0 + hm->rows * cell + 12;
    if (L.height < L.y0 + 120) L.height = L.y0 + 120; /* room for the scale */
    if (font && hm->title) {
        int tw = font_width(font, 15, hm->title) + 24;
        if (L.width < tw) L.width = tw;
    }
    return L;
}

/* One heatmap into im with its layout's top-left corner at (ox, oy). */
static void heatmap_draw(Image *im, int ox, int oy, const Heatmap *hm, const HeatmapLayout *L, Font *font) {
    if (L->cell < 6) font = NULL; /* as the layout decided: no room for labels */
    int px = font_px(L->cell), x0 = ox + L->x0, y0 = oy + L->y0;
    for (int i = 0; i < hm->rows; i++)
        for (int j = 0; j < hm->cols; j++)
            image_fill_rect(im, x0 + j * L->cell, y0 + i * L->cell, L->cell, L->cell, viz_colormap(hm->w[(size_t)i * hm->cols + j]));
    if (font) {
        if (hm->title) font_draw(font, im, ox + 12, oy + 6, 15, hm->title, BLACK, false);
        for (int i = 0; hm->row_labels && i < hm->rows; i++) {
            int w = font_width(font, px, hm->row_labels[i]);
            font_draw(font, im, x0 - 6 - w, y0 + i * L->cell + (L->cell - px) / 2 - 1, px, hm->row_labels[i], BLACK, false);
        }
        for (int j = 0; hm->col_labels && j < hm->cols; j++) /* vertical, ending just above the grid */
            font_draw(font, im, x0 + j * L->cell + (L->cell - px) / 2 - 1, y0 - 6, px, hm->col_labels[j], BLACK, true);
    }
    /* colour scale: 1 at the top, 0 at the bottom */
    int sx = x0 + hm->cols * L->cell + 20, sh = hm->rows * L->cell < 100 ? 100 : hm->rows * L->cell;
    for (int y = 0; y < sh; y++) image_fill_rect(im, sx, y0 + y, 16, 1, viz_colormap(1.0f - (float)y / (float)(sh - 1)));
    image_line(im, sx - 1, y0 - 1, sx + 16, y0 - 1, GREY);
    image_line(im, sx - 1, y0 + sh, sx + 16, y0 + sh, GREY);
    if (font) {
        const char *ticks[3] = {"1.0", "0.5", "0.0"};
        for (int k = 0; k < 3; k++) font_draw(font, im, sx + 20, y0 + k * (sh - 1) / 2 - 6, 11, ticks[k], BLACK, false);
    }
}

S2sStatus heatmap_write_png(const char *path, const Heatmap *hm, Font *font, S2sError *err) {
    return heatmap_grid_write_png(path, hm, 1, 1, font, err);
}

S2sStatus heatmap_grid_write_png(const char *path, const Heatmap *maps, int n, int per_row, Font *font, S2sError *err) {
    S2S_ASSERT(n > 0 && per_row > 0);
    /* every panel in a cell of the largest panel's size */
    int cw = 0, ch = 0;
    for (int k = 0; k < n; k++) {
        S2S_ASSERT(maps[k].rows > 0 && maps[k].cols > 0);
        HeatmapLayout L = heatmap_layout(&maps[k], font);
        cw = L.width > cw ? L.width : cw;
        ch = L.height > ch ? L.height : ch;
    }
    int cols = n < per_row ? n : per_row, rows = (n + per_row - 1) / per_row;
    Image im;
    long W = (long)cw * cols, Hh = (long)ch * rows; /* image_new refuses what is too large */
    S2sStatus st = image_new(&im, W > INT_MAX ? INT_MAX : (int)W, Hh > INT_MAX ? INT_MAX : (int)Hh, WHITE, err);
    if (st) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return s2s_fail(err, st, "%s: %d x %d attention weights%s: %s", path, maps[0].rows, maps[0].cols,
                        n > 1 ? " in several panels" : "", msg);
    }
    for (int k = 0; k < n; k++) {
        HeatmapLayout L = heatmap_layout(&maps[k], font);
        heatmap_draw(&im, (k % per_row) * cw, (k / per_row) * ch, &maps[k], &L, font);
    }
    st = png_write(path, &im, err);
    image_free(&im);
    return st;
}
