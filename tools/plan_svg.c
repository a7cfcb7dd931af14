/* SVG picture of a plan map, meant to be read without hovering: one panel
 * per compute buffer, x = step, y = offset (0 at the bottom), a box per
 * tensor from the step it is made to the last step it is read.  The step
 * where the most bytes are live is marked, its live tensors outlined and
 * listed beside the plot with leader lines; the largest boxes carry their
 * name and size; both axes have ticks; a legend names every colour and mark. */
#include "plan_map.h"
#include "tgsched.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_W 1280.0
#define PANEL_H 470.0
#define HEADER_H 46.0
#define LEGEND_H 70.0
#define PLOT_X 84.0
#define PLOT_W 820.0
#define PLOT_TOP 58.0 /* below the panel's title and the fullest-step label */
#define PLOT_H 350.0
#define LIST_X (PLOT_X + PLOT_W + 40.0)
#define FONT 11.0
#define CHAR_W 6.6       /* sans-serif at 11 px, a little generous */
#define MIN_BOX_W 2.5    /* a one-step tensor stays visible in a long graph */
#define MIN_BOX_H 1.0
#define PEAK_BOX_W 9.0    /* boxes live at the fullest step */
#define LIST_MAX 14      /* live tensors listed beside the plot */
#define LABELS_MAX 12    /* boxes labelled inside */

enum colour_kind { K_MATMUL, K_NORM, K_ELEMENTWISE, K_ATTENTION, K_LAYOUT, K_ROPE, K_INPUT, K_SPLIT_COPY, K_OTHER, K_COUNT };

static const struct {
    const char *name, *fill;
} kinds[K_COUNT] = {
    [K_MATMUL] = {"matmul", "#4e79a7"},          [K_NORM] = {"norm", "#59a14f"},
    [K_ELEMENTWISE] = {"elementwise", "#f28e2b"}, [K_ATTENTION] = {"attention", "#b07aa1"},
    [K_LAYOUT] = {"copy/layout", "#bab0ac"},     [K_ROPE] = {"rope", "#76b7b2"},
    [K_INPUT] = {"input/leaf", "#edc948"},       [K_SPLIT_COPY] = {"split copy (scheduler)", "#8c564b"},
    [K_OTHER] = {"other", "#e15759"},
};

static enum colour_kind kind_of(const struct plan_rect *r) {
    if (r->split_copy) return K_SPLIT_COPY;
    switch (r->tensor->op) {
    case TG_OP_MUL_MAT: case TG_OP_MUL_MAT_ID: case TG_OP_OUT_PROD: return K_MATMUL;
    case TG_OP_RMS_NORM: case TG_OP_NORM: case TG_OP_GROUP_NORM: case TG_OP_L2_NORM: return K_NORM;
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV: case TG_OP_ADD1: case TG_OP_SCALE:
    case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_UNARY: case TG_OP_GLU: case TG_OP_FILL:
        return K_ELEMENTWISE;
    case TG_OP_SOFT_MAX: case TG_OP_FLASH_ATTN_EXT: case TG_OP_DIAG_MASK_INF: return K_ATTENTION;
    case TG_OP_CPY: case TG_OP_CONT: case TG_OP_DUP: case TG_OP_SET_ROWS: case TG_OP_GET_ROWS:
    case TG_OP_CONCAT: return K_LAYOUT;
    case TG_OP_ROPE: return K_ROPE;
    case TG_OP_NONE: return K_INPUT;
    default: return K_OTHER;
    }
}

/* Whether the UTF-8 character c (len bytes) may appear in XML 1.0: no C0
 * control but tab and newlines, not U+FFFE or U+FFFF (the UTF-8 check has
 * ruled out surrogates). */
static bool xml_char(const unsigned char *c, size_t len) {
    if (len == 1) return c[0] >= 0x20 || c[0] == '\t' || c[0] == '\n' || c[0] == '\r';
    return !(len == 3 && c[0] == 0xef && c[1] == 0xbf && c[2] >= 0xbe);
}

/* Tensor names are bytes from a file: anything that would make the picture
 * malformed XML (not UTF-8, a control character) is drawn as U+FFFD. */
static void xml_text(FILE *f, const char *s) {
    for (size_t i = 0, n = strlen(s); i < n;) {
        const size_t len = tgsched_utf8_length(s + i, n - i);
        if (len == 0 || !xml_char((const unsigned char *)s + i, len)) {
            fputs("&#xFFFD;", f);
            i += len ? len : 1;
            continue;
        }
        switch (s[i]) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fwrite(s + i, 1, len, f);
        }
        i += len;
    }
}

#define NAME_MAX_BYTES 40 /* a name in a label: the layout counts on at most this */

/* name, cut to at most NAME_MAX_BYTES at a character boundary (a byte cut
 * could split a UTF-8 character, which is malformed XML). */
static const char *short_name(char out[NAME_MAX_BYTES + 1], const char *name) {
    size_t n = 0;
    const size_t total = strlen(name);
    while (n < total) {
        const size_t len = tgsched_utf8_length(name + n, total - n);
        const size_t step = len ? len : 1; /* a stray byte alone (xml_text replaces it) */
        if (n + step > NAME_MAX_BYTES) break;
        n += step;
    }
    memcpy(out, name, n);
    out[n] = '\0';
    return out;
}

static void human_bytes(char *out, size_t n, double bytes) {
    if (bytes >= 1024.0 * 1024.0 * 1024.0) snprintf(out, n, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
    else if (bytes >= 1024.0 * 1024.0) snprintf(out, n, "%.2f MiB", bytes / (1024.0 * 1024.0));
    else if (bytes >= 1024.0) snprintf(out, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(out, n, "%.0f B", bytes);
}

/* A label: text of class "label" (the render test finds and checks these). */
static void label(FILE *f, double x, double y, const char *anchor, const char *weight, const char *text) {
    fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\" font-weight=\"%s\">", x,
            y, FONT, anchor, weight);
    xml_text(f, text);
    fputs("</text>\n", f);
}

/* 1, 2 or 5 times a power of ten, the smallest giving at most max_ticks ticks over span. */
static double nice_step(double span, int max_ticks) {
    double step = 1.0;
    while (span / step > max_ticks) {
        if (span / (step * 2) <= max_ticks) return step * 2;
        if (span / (step * 5) <= max_ticks) return step * 5;
        step *= 10;
    }
    return step;
}

struct frame {
    double y0, sx, sy, base_y;
    size_t top;
    int peak_step;
};

static double box_x(const struct frame *fr, int step) { return PLOT_X + step * fr->sx; }
/* Left edge and width of r's box: at least MIN_BOX_W wide, and the boxes live
 * at the fullest step at least PEAK_BOX_W, centred on their steps (they set
 * the peak, and are often one step long). */
static double box_w(const struct frame *fr, const struct plan_rect *r) {
    double w = (r->end - r->start + 1) * fr->sx, min = fr->peak_step >= 0 && plan_rect_live_at(r, fr->peak_step) ? PEAK_BOX_W : MIN_BOX_W;
    return w < min ? min : w;
}
static double box_left(const struct frame *fr, const struct plan_rect *r) {
    double w = (r->end - r->start + 1) * fr->sx;
    return box_x(fr, r->start) - (box_w(fr, r) - w) / 2;
}
static double box_h(const struct frame *fr, const struct plan_rect *r) {
    double h = (double)r->size * fr->sy;
    return h < MIN_BOX_H ? MIN_BOX_H : h;
}
static double box_top(const struct frame *fr, const struct plan_rect *r) {
    return fr->base_y - (double)(r->offset + r->size) * fr->sy;
}

static void axes(FILE *f, const struct plan_map *map, const struct frame *fr) {
    double steps = map->n_steps > 0 ? map->n_steps : 1;
    double xs = nice_step(steps, 10);
    for (double s = 0; s < steps; s += xs) {
        double x = PLOT_X + s * fr->sx;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", x, fr->base_y, x,
                fr->base_y + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%.0f</text>\n", x,
                fr->base_y + 16, s);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"middle\">step (node in execution order, "
               "0..%d)</text>\n", PLOT_X + PLOT_W / 2, fr->base_y + 32, FONT, map->n_steps > 0 ? map->n_steps - 1 : 0);
    /* bytes: ticks in the unit of the top */
    double unit = fr->top >= (1u << 20) ? 1024.0 * 1024.0 : fr->top >= 1024 ? 1024.0 : 1.0;
    const char *unit_name = unit > 1024.0 ? "MiB" : unit > 1.0 ? "KiB" : "B";
    double ys = nice_step((double)fr->top / unit, 6);
    for (double v = 0; v * unit <= (double)fr->top * 1.0001; v += ys) {
        double y = fr->base_y - v * unit * fr->sy;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n", PLOT_X - 5, y, PLOT_X, y);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\" stroke-width=\"0.5\"/>\n",
                PLOT_X, y, PLOT_X + PLOT_W, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g %s</text>\n", PLOT_X - 8, y + 3,
                v, unit_name);
    }
    fprintf(f, "<text x=\"16\" y=\"%.1f\" font-size=\"%.0f\" transform=\"rotate(-90 16 %.1f)\" text-anchor=\"middle\">"
               "offset in the buffer</text>\n", fr->base_y - PLOT_H / 2, FONT, fr->base_y - PLOT_H / 2);
}

static void hline(FILE *f, const struct frame *fr, size_t bytes, const char *colour, const char *dash, const char *what,
                  bool left) {
    char hb[32], text[160];
    human_bytes(hb, sizeof hb, (double)bytes);
    double y = fr->base_y - (double)bytes * fr->sy;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.2\" "
               "stroke-dasharray=\"%s\"/>\n", PLOT_X, y, PLOT_X + PLOT_W, y, colour, dash);
    snprintf(text, sizeof text, "%s %s", what, hb);
    /* the peak on the right, the lower bound on the left: they coincide on tight plans */
    fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" fill=\"%s\" text-anchor=\"%s\">", left ? PLOT_X + 4 : PLOT_X + PLOT_W - 4, y + 12, FONT, colour, left ? "start" : "end");
    xml_text(f, text);
    fputs("</text>\n", f);
}

/* The live tensors at the fullest step, beside the plot, top to bottom in
 * offset order, each with a leader line to its box at that step. */
static void live_list(FILE *f, const struct plan_panel *p, const struct frame *fr) {
    int shown[LIST_MAX];
    int n_live = plan_panel_live_set(p, p->peak_step, shown, LIST_MAX);
    int n = n_live < LIST_MAX ? n_live : LIST_MAX;
    /* offset order, highest first, so the list reads like the plot */
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && p->rects[shown[j - 1]].offset < p->rects[shown[j]].offset; j--) {
            int t = shown[j];
            shown[j] = shown[j - 1];
            shown[j - 1] = t;
        }
    }
    char hb[32], text[160];
    human_bytes(hb, sizeof hb, (double)p->peak_live);
    snprintf(text, sizeof text, "live at the fullest step %d: %s", p->peak_step, hb);
    label(f, LIST_X, fr->y0 + PLOT_TOP + 4, "start", "bold", text);
    double px = box_x(fr, p->peak_step) + fr->sx / 2;
    double row = (PLOT_H - 30) / (LIST_MAX + 1);
    if (row > 22) row = 22;
    size_t rest = p->peak_live;
    for (int k = 0; k < n; k++) {
        const struct plan_rect *r = &p->rects[shown[k]];
        double y = fr->y0 + PLOT_TOP + 24 + k * row;
        double by = box_top(fr, r) + box_h(fr, r) / 2;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-width=\"0.6\"/>\n", px,
                by, LIST_X - 4, y - 4);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\" stroke=\"#000\"/>\n", LIST_X,
                y - 9, kinds[kind_of(r)].fill);
        human_bytes(hb, sizeof hb, (double)r->size);
        char name[NAME_MAX_BYTES + 1];
        snprintf(text, sizeof text, "%s %s, steps %d-%d", short_name(name, r->tensor->name), hb, r->start, r->end);
        label(f, LIST_X + 14, y, "start", "normal", text);
        rest = rest > r->size ? rest - r->size : 0;
    }
    if (n_live > n) {
        human_bytes(hb, sizeof hb, (double)rest);
        snprintf(text, sizeof text, "and %d smaller tensors, %s", n_live - n, hb);
        label(f, LIST_X + 14, fr->y0 + PLOT_TOP + 24 + n * row, "start", "normal", text);
    }
}

/* Text boxes already placed in a panel, so labels never cover each other. */
struct placed_labels {
    int n;
    double box[LABELS_MAX + 8][4]; /* x0, y0, x1, y1 */
};

static bool place_label(struct placed_labels *pl, double x0, double y0, double x1, double y1) {
    if (x0 < PLOT_X || x1 > PLOT_X + PLOT_W || pl->n == LABELS_MAX + 8) return false;
    for (int i = 0; i < pl->n; i++) {
        if (x0 < pl->box[i][2] && pl->box[i][0] < x1 && y0 < pl->box[i][3] && pl->box[i][1] < y1) return false;
    }
    pl->box[pl->n][0] = x0, pl->box[pl->n][1] = y0, pl->box[pl->n][2] = x1, pl->box[pl->n][3] = y1;
    pl->n++;
    return true;
}

/* Name and size of the largest tensors: inside the box when it holds the
 * text, else right of it on a white ground, where no other label is. */
static void box_labels(FILE *f, const struct plan_panel *p, const struct frame *fr, struct placed_labels *pl) {
    int order[4 * LABELS_MAX];
    int n = plan_panel_largest(p, order, 4 * LABELS_MAX);
    int done = 0;
    for (int k = 0; k < n && done < LABELS_MAX; k++) {
        const struct plan_rect *r = &p->rects[order[k]];
        char hb[32], text[128], name[NAME_MAX_BYTES + 1];
        human_bytes(hb, sizeof hb, (double)r->size);
        snprintf(text, sizeof text, "%s %s", short_name(name, r->tensor->name), hb);
        double x = box_left(fr, r), w = box_w(fr, r), h = box_h(fr, r), top = box_top(fr, r);
        double tw = (double)strlen(text) * CHAR_W + 6, ty = top + h / 2 + FONT / 2 - 1;
        if (h < FONT + 2) continue;
        if (w >= tw && place_label(pl, x, ty - FONT, x + tw, ty + 2)) {
            label(f, x + 3, ty, "start", "normal", text);
            done++;
        } else if (place_label(pl, x + w + 2, ty - FONT - 1, x + w + 2 + tw, ty + 3)) {
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" fill-opacity=\"0.85\"/>\n",
                    x + w + 2, ty - FONT - 1, tw, FONT + 4);
            label(f, x + w + 5, ty, "start", "normal", text);
            done++;
        }
    }
}

static void write_panel(FILE *f, const struct plan_map *map, const struct plan_panel *p, double y0) {
    struct frame fr = {.y0 = y0, .base_y = y0 + PLOT_TOP + PLOT_H, .peak_step = p->peak_step};
    fr.top = p->peak > p->lower_bound ? p->peak : p->lower_bound;
    if (fr.top == 0) fr.top = 1;
    fr.sx = PLOT_W / (map->n_steps > 0 ? map->n_steps : 1);
    fr.sy = PLOT_H / (double)fr.top;
    char peak_s[32], lb_s[32], title[256];
    human_bytes(peak_s, sizeof peak_s, (double)p->peak);
    human_bytes(lb_s, sizeof lb_s, (double)p->lower_bound);
    int len = snprintf(title, sizeof title, "%s: %d tensors, %s", p->title, p->n_rects, peak_s);
    if (p->lower_bound && len > 0 && (size_t)len < sizeof title) {
        snprintf(title + len, sizeof title - (size_t)len, " against a lower bound of %s (ratio %.3f)", lb_s,
                 (double)p->peak / (double)p->lower_bound);
    }
    label(f, PLOT_X, y0 + 18, "start", "bold", title);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#444\"/>\n", PLOT_X,
            y0 + PLOT_TOP, PLOT_W, PLOT_H);
    axes(f, map, &fr);
    double peak_x = box_x(&fr, p->peak_step) + fr.sx / 2;
    if (p->peak_step >= 0) { /* a band behind the boxes: the boxes it crosses are the live set */
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ff0000\" fill-opacity=\"0.18\"/>\n",
                peak_x - PEAK_BOX_W / 2 - 3, y0 + PLOT_TOP, PEAK_BOX_W + 6, PLOT_H);
    }
    for (int pass = 0; pass < 2; pass++) { /* the live set at the fullest step on top */
        for (int i = 0; i < p->n_rects; i++) {
            const struct plan_rect *r = &p->rects[i];
            bool at_peak = plan_rect_live_at(r, p->peak_step);
            if (at_peak != (pass == 1)) continue;
            char sz[32];
            human_bytes(sz, sizeof sz, (double)r->size);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"%s\" "
                       "stroke-width=\"%s\"><title>", box_left(&fr, r), box_top(&fr, r), box_w(&fr, r), box_h(&fr, r),
                    kinds[kind_of(r)].fill, at_peak ? "#000" : "#333", at_peak ? "1.5" : "0.3");
            xml_text(f, r->tensor->name);
            fprintf(f, " (%s) steps %d-%d offset %zu size %s</title></rect>\n", tg_op_name(r->tensor->op), r->start,
                    r->end, r->offset, sz);
        }
    }
    /* in-place: a short tick where a box takes over its source's memory */
    for (int i = 0; i < p->n_rects; i++) {
        const struct plan_rect *r = &p->rects[i];
        if (r->inplace_parent < 0) continue;
        double x = box_left(&fr, r), y = box_top(&fr, r) + box_h(&fr, r) / 2;
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000\" stroke-width=\"1.5\"/>\n", x,
                y - 4, x, y + 4);
    }
    struct placed_labels pl = {0};
    char size_what[96] = "size";
    int top_rect = plan_panel_top(p);
    char name[NAME_MAX_BYTES + 1];
    if (top_rect >= 0)
        snprintf(size_what, sizeof size_what, "size, reached by %s:", short_name(name, p->rects[top_rect].tensor->name));
    hline(f, &fr, p->peak, "#c00000", "6,4", size_what, false);
    double y = fr.base_y - (double)p->peak * fr.sy;
    place_label(&pl, PLOT_X + PLOT_W - 10 - (double)(strlen(size_what) + 10) * CHAR_W, y, PLOT_X + PLOT_W, y + 14);
    if (p->lower_bound) {
        hline(f, &fr, p->lower_bound, "#007000", "2,3", "lower bound", true);
        y = fr.base_y - (double)p->lower_bound * fr.sy;
        place_label(&pl, PLOT_X, y, PLOT_X + 150, y + 14);
    }
    if (p->peak_step >= 0) {
        fprintf(f, "<path d=\"M %.1f %.1f l -5 -8 l 10 0 z\" fill=\"#d00000\"/>\n", peak_x, y0 + PLOT_TOP - 1);
        char text[96];
        snprintf(text, sizeof text, "fullest step %d", p->peak_step);
        bool right_half = peak_x > PLOT_X + PLOT_W / 2;
        label(f, right_half ? peak_x - 8 : peak_x + 8, y0 + PLOT_TOP - 5, right_half ? "end" : "start", "bold", text);
        live_list(f, p, &fr);
    }
    box_labels(f, p, &fr, &pl);
}

static void legend(FILE *f, double y) {
    double x = PLOT_X;
    for (int k = 0; k < K_COUNT; k++) {
        double w = 22 + (double)strlen(kinds[k].name) * CHAR_W;
        if (x + w > PAGE_W - 10) {
            x = PLOT_X;
            y += 20;
        }
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#333\"/>\n", x, y - 10,
                kinds[k].fill);
        label(f, x + 16, y, "start", "normal", kinds[k].name);
        x += w + 14;
    }
    y += 22;
    x = PLOT_X;
    struct {
        const char *svg, *text;
    } marks[] = {
        {"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"2\"/>",
         "in-place: the box right of the tick took over its source's memory"},
        {"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ff0000\" fill-opacity=\"0.18\"/>",
         "fullest step (most bytes live): its live boxes are outlined, at least 9 px wide, and listed"},
    };
    for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
        if (m == 0) fprintf(f, marks[m].svg, x + 6, y - 11, x + 6, y + 2);
        else fprintf(f, marks[m].svg, x, y - 11, 12.0, 13.0);
        fputc('\n', f);
        label(f, x + 16, y, "start", "normal", marks[m].text);
        x += 26 + (double)strlen(marks[m].text) * CHAR_W;
    }
    y += 20;
    x = PLOT_X;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00000\" stroke-dasharray=\"6,4\" "
               "stroke-width=\"1.2\"/>\n", x, y - 4, x + 24, y - 4);
    label(f, x + 30, y, "start", "normal", "size: the buffer's highest byte");
    x += 60 + 31 * CHAR_W;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#007000\" stroke-dasharray=\"2,3\" "
               "stroke-width=\"1.2\"/>\n", x, y - 4, x + 24, y - 4);
    label(f, x + 30, y, "start", "normal", "lower bound: the most bytes live at one step, each size rounded up to the alignment (no plan is smaller)");
}

enum tg_status plan_map_write_svg(const struct plan_map *map, const char *path) {
    struct tgsched_output_file file;
    if (!tgsched_output_open(&file, path)) return tg_fail(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    FILE *f = file.f;
    int panels = map->n_panels > 0 ? map->n_panels : 1;
    double height = HEADER_H + panels * PANEL_H + LEGEND_H + 20;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"DejaVu Sans, "
               "sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", PAGE_W, height);
    label(f, 16, 20, "start", "bold", "Memory map: each box is one tensor, from the step that makes it to the last step "
          "that reads it (x), at its bytes in the buffer (y).");
    if (map->n_panels == 0) label(f, 16, HEADER_H + 20, "start", "normal", "no planned tensors");
    for (int p = 0; p < map->n_panels; p++) write_panel(f, map, &map->panels[p], HEADER_H + p * PANEL_H);
    legend(f, HEADER_H + panels * PANEL_H + 10);
    fputs("</svg>\n", f);
    const bool replaced = file.temp != NULL; /* else written in place: part of it may be out */
    if (!tgsched_output_commit(&file))
        return tg_fail(TG_ERR_IO, "cannot write '%s'%s: %s", path, replaced ? " (left as it was)" : "", strerror(errno));
    return TG_OK;
}
