/* SVG rendering of a plan map: one panel per buffer, x = node step,
 * y = byte offset (0 at the bottom), a rectangle per tensor lifetime. */
#include "plan_map.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define PANEL_W 1100.0
#define PANEL_H 420.0
#define MARGIN_L 90.0
#define MARGIN_T 40.0
#define PLOT_W (PANEL_W - MARGIN_L - 30.0)
#define PLOT_H (PANEL_H - MARGIN_T - 50.0)

struct op_colour {
    const char *kind;
    const char *fill;
};

static const struct op_colour palette[] = {
    {"matmul", "#4e79a7"}, {"norm", "#59a14f"}, {"elementwise", "#f28e2b"}, {"attention", "#b07aa1"},
    {"copy", "#9c9c9c"},   {"rope", "#76b7b2"}, {"input/leaf", "#edc948"}, {"other", "#e15759"},
};

static int op_kind(const struct tg_tensor *t) {
    switch (t->op) {
    case TG_OP_MUL_MAT: case TG_OP_MUL_MAT_ID: case TG_OP_OUT_PROD: return 0;
    case TG_OP_RMS_NORM: case TG_OP_NORM: case TG_OP_GROUP_NORM: case TG_OP_L2_NORM: return 1;
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV: case TG_OP_ADD1: case TG_OP_SCALE:
    case TG_OP_SQR: case TG_OP_SQRT: case TG_OP_LOG: case TG_OP_UNARY: case TG_OP_GLU: case TG_OP_FILL:
        return 2;
    case TG_OP_SOFT_MAX: case TG_OP_FLASH_ATTN_EXT: case TG_OP_DIAG_MASK_INF: return 3;
    case TG_OP_CPY: case TG_OP_CONT: case TG_OP_DUP: case TG_OP_SET_ROWS: case TG_OP_GET_ROWS:
    case TG_OP_CONCAT: return 4;
    case TG_OP_ROPE: return 5;
    case TG_OP_NONE: return 6;
    default: return 7;
    }
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void human_bytes(char *out, size_t n, size_t bytes) {
    if (bytes >= ((size_t)1 << 30)) snprintf(out, n, "%.2f GiB", (double)bytes / (double)((size_t)1 << 30));
    else if (bytes >= ((size_t)1 << 20)) snprintf(out, n, "%.2f MiB", (double)bytes / (double)((size_t)1 << 20));
    else if (bytes >= 1024) snprintf(out, n, "%.1f KiB", (double)bytes / 1024.0);
    else snprintf(out, n, "%zu B", bytes);
}

static void hline(FILE *f, double y0, double y, const char *colour, const char *label, size_t bytes, bool left) {
    char hb[32];
    human_bytes(hb, sizeof hb, bytes);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6,4\"/>\n",
            MARGIN_L, y0 + y, MARGIN_L + PLOT_W, y0 + y, colour);
    /* peak on the right, lower bound on the left: they coincide on tight plans */
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"%s\" text-anchor=\"%s\">%s %s</text>\n",
            left ? MARGIN_L + 4 : MARGIN_L + PLOT_W, y0 + y - 3, colour, left ? "start" : "end", label, hb);
}

static void write_panel(FILE *f, const struct plan_map *map, const struct plan_panel *p, double y0) {
    double steps = map->n_steps > 0 ? map->n_steps : 1;
    size_t top = p->peak > p->lower_bound ? p->peak : p->lower_bound;
    if (top == 0) top = 1;
    double sx = PLOT_W / steps, sy = PLOT_H / (double)top;
    char peak_s[32], lb_s[32];
    human_bytes(peak_s, sizeof peak_s, p->peak);
    human_bytes(lb_s, sizeof lb_s, p->lower_bound);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">", MARGIN_L, y0 + 22);
    xml_text(f, p->title);
    fprintf(f, ": %d tensors, peak %s", p->n_rects, peak_s);
    if (p->lower_bound) fprintf(f, ", lower bound %s, ratio %.3f", lb_s, (double)p->peak / (double)p->lower_bound);
    fputs("</text>\n", f);
    double base_y = y0 + MARGIN_T + PLOT_H;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#444\"/>\n",
            MARGIN_L, y0 + MARGIN_T, PLOT_W, PLOT_H);
    for (int i = 0; i < p->n_rects; i++) {
        const struct plan_rect *r = &p->rects[i];
        double x = MARGIN_L + r->start * sx, w = (r->end - r->start + 1) * sx;
        double h = (double)r->size * sy, y = base_y - (double)(r->offset + r->size) * sy;
        char sz[32];
        human_bytes(sz, sizeof sz, r->size);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"0.8\" "
                "stroke=\"#222\" stroke-width=\"0.3\"><title>", x, y, w, h < 0.5 ? 0.5 : h, palette[op_kind(r->tensor)].fill);
        xml_text(f, r->tensor->name);
        fprintf(f, " (%s) steps %d-%d offset %zu size %s</title></rect>\n", tg_op_name(r->tensor->op), r->start,
                r->end, r->offset, sz);
    }
    for (int i = 0; i < p->n_rects; i++) {
        const struct plan_rect *r = &p->rects[i];
        if (r->inplace_parent < 0) continue;
        const struct plan_rect *q = &p->rects[r->inplace_parent];
        double y = base_y - ((double)r->offset + (double)r->size / 2) * sy;
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#000\" stroke-width=\"1.2\"/>\n",
                MARGIN_L + (q->start + 0.5) * sx, y, MARGIN_L + (r->start + 0.5) * sx, y);
    }
    hline(f, base_y, -(double)p->peak * sy, "#c00", "peak", p->peak, false);
    if (p->lower_bound) hline(f, base_y, -(double)p->lower_bound * sy, "#080", "lower bound", p->lower_bound, true);
    /* axes labels */
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">node step (0..%d)</text>\n",
            MARGIN_L + PLOT_W / 2, base_y + 30, map->n_steps > 0 ? map->n_steps - 1 : 0);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">0</text>\n", MARGIN_L - 4, base_y);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", MARGIN_L - 4,
            base_y - PLOT_H + 10, (top == p->peak) ? peak_s : lb_s);
    fprintf(f, "<text x=\"20\" y=\"%.1f\" font-size=\"11\" transform=\"rotate(-90 20 %.1f)\">offset</text>\n",
            base_y - PLOT_H / 2, base_y - PLOT_H / 2);
}

enum tg_status plan_map_write_svg(const struct plan_map *map, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return tg_fail(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    int panels = map->n_panels > 0 ? map->n_panels : 1;
    double height = panels * PANEL_H + 40;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", PANEL_W, height);
    if (map->n_panels == 0) {
        fputs("<text x=\"20\" y=\"40\">no planned tensors</text>\n", f);
    }
    for (int p = 0; p < map->n_panels; p++) write_panel(f, map, &map->panels[p], p * PANEL_H);
    /* legend */
    double lx = MARGIN_L, ly = panels * PANEL_H + 20;
    for (size_t k = 0; k < sizeof palette / sizeof palette[0]; k++) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
                lx, ly - 10, palette[k].fill, lx + 16, ly, palette[k].kind);
        lx += 120;
    }
    fputs("</svg>\n", f);
    if (fclose(f) != 0) return tg_fail(TG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return TG_OK;
}
