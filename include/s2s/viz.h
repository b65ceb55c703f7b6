/* viz.h — pictures without Python: RGB images, text with FreeType (DejaVu), PNG files with
 * libpng, attention heatmaps, line plots and bar charts.
 *
 * An Image owns its pixels; a Font owns its FreeType library and face (font_open returns
 * NULL when the font is missing: drawing then goes on without labels, and callers warn).
 * png_write writes through a temporary file and a rename; libpng's setjmp stays inside it. */
#ifndef S2S_VIZ_H
#define S2S_VIZ_H

#include "s2s/common.h"

#include <stdint.h>

typedef struct Image {
    int w, h;
    uint8_t *rgb; /* (h, w, 3) */
} Image;

typedef struct Rgb {
    uint8_t r, g, b;
} Rgb;

/* Pictures are bounded: at most IMAGE_MAX_SIDE pixels a side and IMAGE_MAX_PIXELS in all;
 * a larger one is an error (S2S_ERR_DATA), never an abort, so input that asks for a huge
 * picture costs a warning. */
#define IMAGE_MAX_SIDE 16384
#define IMAGE_MAX_PIXELS ((size_t)1 << 26)
S2sStatus image_new(Image *im, int w, int h, Rgb fill, S2sError *err);
void image_free(Image *im);
void image_fill_rect(Image *im, int x, int y, int w, int h, Rgb c);
void image_line(Image *im, int x0, int y0, int x1, int y1, Rgb c);
Rgb image_get(const Image *im, int x, int y);

S2sStatus png_write(const char *path, const Image *im, S2sError *err);
/* Reads an 8-bit RGB or RGBA PNG (for tests and checks). */
S2sStatus png_read(const char *path, Image *im, S2sError *err);

typedef struct Font Font;
/* path NULL: the DejaVu Sans of Debian's fonts-dejavu-core. NULL when it cannot be opened. */
Font *font_open(const char *path);
void font_close(Font *f);
/* Draws UTF-8 text with its top-left corner at (x, y), px pixels high; vertical draws it
 * rotated by 90° (reading bottom to top), with (x, y) its bottom-left corner. Returns the
 * advance in pixels. Invalid UTF-8 bytes are drawn as U+FFFD. */
int font_draw(Font *f, Image *im, int x, int y, int px, const char *text, Rgb c, bool vertical);
int font_width(Font *f, int px, const char *text);

/* The colour of an attention weight in [0, 1] (dark → bright, perceptually ordered). */
Rgb viz_colormap(float v);

/* An attention heatmap: rows are output tokens, columns source tokens, cell brightness the
 * weight; tokens along both axes, a colour scale, a title. w (rows, cols). */
typedef struct Heatmap {
    const float *w;
    int rows, cols;
    const char *const *row_labels; /* (rows) or NULL */
    const char *const *col_labels; /* (cols) or NULL */
    const char *title;             /* or NULL */
} Heatmap;

/* Geometry, so tests can find a cell: its top-left pixel and size. */
typedef struct HeatmapLayout {
    int x0, y0, cell, width, height;
} HeatmapLayout;

HeatmapLayout heatmap_layout(const Heatmap *hm, Font *font);
S2sStatus heatmap_write_png(const char *path, const Heatmap *hm, Font *font, S2sError *err);
/* n heatmaps in one picture, per_row panels a row (the heads of multi-head attention); each
 * panel as heatmap_write_png draws it alone, in a cell of the largest panel's size. */
S2sStatus heatmap_grid_write_png(const char *path, const Heatmap *maps, int n, int per_row, Font *font, S2sError *err);

/* Line plots (learning curves): up to PLOT_MAX_SERIES series on a shared x axis, a left y axis. */
#define PLOT_MAX_SERIES 8
typedef struct Series {
    const char *name;
    const double *y; /* (n); NaN skips a point (the line joins its neighbours) */
    Rgb color;
} Series;

typedef struct Plot {
    const char *title, *xlabel, *ylabel;
    const double *x; /* (n) */
    int n;
    Series series[PLOT_MAX_SERIES];
    int n_series;
} Plot;

S2sStatus plot_write_png(const char *path, const Plot *p, Font *font, S2sError *err);
/* The same plot into a W × H panel of a larger image, at (ox, oy). */
S2sStatus plot_draw(Image *canvas, int ox, int oy, int W, int H, const Plot *p, Font *font, S2sError *err);

/* Bar charts: a group's mean as a bar, ±sd (when n > 1), its values as dots, the mean written
 * above; up to BARS_MAX_GROUPS groups side by side. */
#define BARS_MAX_GROUPS 16
typedef struct BarGroup {
    const char *label;
    double mean, sd, max; /* max: the highest value, to keep the label clear of the dots */
    int n;                /* values behind mean and sd */
    const double *points; /* (n_points) values drawn as dots; NaN: skipped */
    int n_points;
} BarGroup;

typedef struct BarChart {
    const char *title;    /* or NULL */
    const BarGroup *groups;
    int n;
} BarChart;

S2sStatus bars_write_png(const char *path, const BarChart *b, Font *font, S2sError *err);

#endif
