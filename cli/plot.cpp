// Training curves as SVG or PNG: see plot.h. One drawing routine paints the chart through a
// Painter; SvgPainter writes elements, RasterPainter fills an RGB image (no anti-aliasing, square
// brushes, 5x7 font scaled by whole pixels), so both formats put every mark in the same place.
#include "cli/plot.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "trainers/metrics.h"

namespace trit::cli {
namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The last path component, without trailing slashes; "." and ".." resolve to the real name.
std::string run_name(const std::string& dir) {
    std::string d = dir;
    while (d.size() > 1 && d.back() == '/')
        d.pop_back();
    std::string base =
        d.substr(d.find_last_of('/') == std::string::npos ? 0 : d.find_last_of('/') + 1);
    if (base == "." || base == ".." || base.empty()) {
        if (char* real = ::realpath(dir.c_str(), nullptr)) {
            const std::string r(real);
            std::free(real);
            base = r.substr(r.find_last_of('/') + 1);
        }
    }
    return base.empty() ? dir : base;
}

// ---- the font: printable ASCII, 5 dots wide, 7 high above the baseline plus one descender row.

struct Glyph {
    char c;
    const char* rows[8];  // '#' = ink; missing rows are blank
};

// clang-format off
const Glyph kGlyphs[] = {
    {' ', {}},
    {'!', {"..#..", "..#..", "..#..", "..#..", "..#..", ".....", "..#.."}},
    {'"', {".#.#.", ".#.#.", ".#.#."}},
    {'#', {".#.#.", ".#.#.", "#####", ".#.#.", "#####", ".#.#.", ".#.#."}},
    {'$', {"..#..", ".####", "#.#..", ".###.", "..#.#", "####.", "..#.."}},
    {'%', {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"}},
    {'&', {".##..", "#..#.", "#.#..", ".#...", "#.#.#", "#..#.", ".##.#"}},
    {'\'', {"..#..", "..#..", ".#..."}},
    {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
    {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
    {'*', {".....", "..#..", "#.#.#", ".###.", "#.#.#", "..#.."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#.."}},
    {',', {".....", ".....", ".....", ".....", ".....", "..#..", "..#..", ".#..."}},
    {'-', {".....", ".....", ".....", "#####"}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {'/', {".....", "....#", "...#.", "..#..", ".#...", "#...."}},
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##.."}},
    {';', {".....", ".##..", ".##..", ".....", ".##..", "..#..", ".#..."}},
    {'<', {"...#.", "..#..", ".#...", "#....", ".#...", "..#..", "...#."}},
    {'=', {".....", ".....", "#####", ".....", "#####"}},
    {'>', {".#...", "..#..", "...#.", "....#", "...#.", "..#..", ".#..."}},
    {'?', {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."}},
    {'@', {".###.", "#...#", "....#", ".##.#", "#.#.#", "#.#.#", ".###."}},
    {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'B', {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."}},
    {'C', {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."}},
    {'D', {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."}},
    {'E', {"#####", "#....", "#....", "####.", "#....", "#....", "#####"}},
    {'F', {"#####", "#....", "#....", "####.", "#....", "#....", "#...."}},
    {'G', {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"}},
    {'H', {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'I', {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'J', {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'K', {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"}},
    {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
    {'M', {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"}},
    {'N', {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"}},
    {'O', {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'P', {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."}},
    {'Q', {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"}},
    {'R', {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"}},
    {'S', {".####", "#....", "#....", ".###.", "....#", "....#", "####."}},
    {'T', {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'U', {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'V', {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'W', {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."}},
    {'X', {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"}},
    {'Y', {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."}},
    {'Z', {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"}},
    {'[', {".###.", ".#...", ".#...", ".#...", ".#...", ".#...", ".###."}},
    {'\\', {".....", "#....", ".#...", "..#..", "...#.", "....#"}},
    {']', {".###.", "...#.", "...#.", "...#.", "...#.", "...#.", ".###."}},
    {'^', {"..#..", ".#.#.", "#...#"}},
    {'_', {".....", ".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
    {'`', {".#...", "..#..", "...#."}},
    {'a', {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"}},
    {'b', {"#....", "#....", "####.", "#...#", "#...#", "#...#", "####."}},
    {'c', {".....", ".....", ".###.", "#....", "#....", "#...#", ".###."}},
    {'d', {"....#", "....#", ".####", "#...#", "#...#", "#...#", ".####"}},
    {'e', {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."}},
    {'f', {"..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."}},
    {'g', {".....", ".....", ".####", "#...#", "#...#", ".####", "....#", ".###."}},
    {'h', {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'i', {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."}},
    {'j', {"...#.", ".....", "..##.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'k', {"#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."}},
    {'l', {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'m', {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#.#.#", "#.#.#"}},
    {'n', {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'o', {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."}},
    {'p', {".....", ".....", "####.", "#...#", "#...#", "####.", "#....", "#...."}},
    {'q', {".....", ".....", ".####", "#...#", "#...#", ".####", "....#", "....#"}},
    {'r', {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."}},
    {'s', {".....", ".....", ".####", "#....", ".###.", "....#", "####."}},
    {'t', {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."}},
    {'u', {".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"}},
    {'v', {".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'w', {".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."}},
    {'x', {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
    {'y', {".....", ".....", "#...#", "#...#", "#...#", ".####", "....#", ".###."}},
    {'z', {".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"}},
    {'{', {"...#.", "..#..", "..#..", ".#...", "..#..", "..#..", "...#."}},
    {'|', {"..#..", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'}', {".#...", "..#..", "..#..", "...#.", "..#..", "..#..", ".#..."}},
    {'~', {".....", ".....", ".#...", "#.#.#", "...#."}},
};
// clang-format on

const Glyph& glyph(char c) {
    for (const auto& g : kGlyphs)
        if (g.c == c) return g;
    return glyph('?');
}

// Text cell: a character is 6 dots wide (5 + 1 space); a line is 10 dots (8 + 2).
constexpr int kCharDots = 6, kLineDots = 10;

// ---- colours and styles

constexpr Rgb kWhite{255, 255, 255}, kInk{34, 34, 34}, kGrid{232, 232, 232}, kStage{102, 102, 102};

// ---- painters

enum class Align { left, center, right };

class Painter {
  public:
    virtual ~Painter() = default;
    virtual void fill(double x0, double y0, double x1, double y1, Rgb c) = 0;
    virtual void line(double x0, double y0, double x1, double y1, Rgb c, int width) = 0;
    // Pieces of one series, each a run of pixel points inside the panel; `cls` tags the series.
    virtual void series(const std::vector<std::vector<Point>>& pieces, Rgb c, int width,
                        const char* cls) = 0;
    virtual void markers(const std::vector<Point>& centres, Rgb c, int radius) = 0;
    // One dashed vertical line at x over the given (top, bottom) spans.
    virtual void dashed(double x, const std::vector<std::pair<double, double>>& spans, Rgb c,
                        int dash) = 0;
    // `top`: the top of the text cell; scale: pixels per font dot.
    virtual void text(double x, double top, const std::string& s, Rgb c, int scale, Align a) = 0;
};

std::string hex(Rgb c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

std::string xml_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '&')
            o += "&amp;";
        else if (c == '<')
            o += "&lt;";
        else if (c == '>')
            o += "&gt;";
        else if (c == '"')
            o += "&quot;";
        else
            o += c;
    }
    return o;
}

class SvgPainter : public Painter {
  public:
    SvgPainter(int w, int h) {
        os_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
            << "\" viewBox=\"0 0 " << w << ' ' << h
            << "\" font-family=\"DejaVu Sans Mono, monospace\">\n";
    }
    std::string finish() { return os_.str() + "</svg>\n"; }
    void fill(double x0, double y0, double x1, double y1, Rgb c) override {
        os_ << "<rect x=\"" << n(x0) << "\" y=\"" << n(y0) << "\" width=\"" << n(x1 - x0)
            << "\" height=\"" << n(y1 - y0) << "\" fill=\"" << hex(c) << "\"/>\n";
    }
    void line(double x0, double y0, double x1, double y1, Rgb c, int width) override {
        os_ << "<line x1=\"" << n(x0 + .5) << "\" y1=\"" << n(y0 + .5) << "\" x2=\"" << n(x1 + .5)
            << "\" y2=\"" << n(y1 + .5) << "\" stroke=\"" << hex(c) << "\" stroke-width=\"" << width
            << "\"/>\n";
    }
    void series(const std::vector<std::vector<Point>>& pieces, Rgb c, int width,
                const char* cls) override {
        os_ << "<path class=\"" << cls << "\" fill=\"none\" stroke=\"" << hex(c)
            << "\" stroke-width=\"" << width << "\" stroke-linejoin=\"round\" d=\"";
        for (const auto& piece : pieces)
            for (size_t i = 0; i < piece.size(); ++i)
                os_ << (i == 0 ? "M" : " L") << n(piece[i].x + .5) << ' ' << n(piece[i].y + .5);
        os_ << "\"/>\n";
    }
    void markers(const std::vector<Point>& centres, Rgb c, int radius) override {
        if (centres.empty()) return;
        os_ << "<g fill=\"" << hex(c) << "\">";
        for (const auto& p : centres)
            os_ << "<circle cx=\"" << n(p.x + .5) << "\" cy=\"" << n(p.y + .5) << "\" r=\""
                << radius << "\"/>";
        os_ << "</g>\n";
    }
    void dashed(double x, const std::vector<std::pair<double, double>>& spans, Rgb c,
                int dash) override {
        os_ << "<path class=\"stage\" fill=\"none\" stroke=\"" << hex(c) << "\" stroke-dasharray=\""
            << dash << ' ' << dash << "\" d=\"";
        for (const auto& [t, b] : spans)
            os_ << "M" << n(x + .5) << ' ' << n(t) << " V" << n(b) << ' ';
        os_ << "\"/>\n";
    }
    void text(double x, double top, const std::string& s, Rgb c, int scale, Align a) override {
        const char* anchor = a == Align::left ? "start" : a == Align::center ? "middle" : "end";
        // A monospace advance is about 0.6 em: 10 px per 6-pixel cell keeps the raster's widths.
        os_ << "<text x=\"" << n(x) << "\" y=\"" << n(top + 7 * scale) << "\" font-size=\""
            << 10 * scale << "\" fill=\"" << hex(c) << "\" text-anchor=\"" << anchor << "\">"
            << xml_escape(s) << "</text>\n";
    }

  private:
    static std::string n(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }
    std::ostringstream os_;
};

class RasterPainter : public Painter {
  public:
    RasterPainter(int w, int h) {
        img_.width = w;
        img_.height = h;
        img_.rgb.assign(static_cast<size_t>(w) * h * 3, 255);
    }
    Image finish() { return std::move(img_); }
    void fill(double x0, double y0, double x1, double y1, Rgb c) override {
        for (int y = pix(y0); y < pix(y1); ++y)
            for (int x = pix(x0); x < pix(x1); ++x)
                put(x, y, c);
    }
    void line(double x0, double y0, double x1, double y1, Rgb c, int width) override {
        segment(pix(x0), pix(y0), pix(x1), pix(y1), c, width / 2);
    }
    void series(const std::vector<std::vector<Point>>& pieces, Rgb c, int width,
                const char*) override {
        for (const auto& piece : pieces) {
            if (piece.size() == 1)
                segment(pix(piece[0].x), pix(piece[0].y), pix(piece[0].x), pix(piece[0].y), c,
                        width / 2);
            for (size_t i = 1; i < piece.size(); ++i)
                segment(pix(piece[i - 1].x), pix(piece[i - 1].y), pix(piece[i].x), pix(piece[i].y),
                        c, width / 2);
        }
    }
    void markers(const std::vector<Point>& centres, Rgb c, int radius) override {
        for (const auto& p : centres)
            for (int dy = -radius; dy <= radius; ++dy)
                for (int dx = -radius; dx <= radius; ++dx)
                    if (dx * dx + dy * dy <= radius * radius + radius)
                        put(pix(p.x) + dx, pix(p.y) + dy, c);
    }
    void dashed(double x, const std::vector<std::pair<double, double>>& spans, Rgb c,
                int dash) override {
        for (const auto& [t, b] : spans)
            for (int y = pix(t); y <= pix(b); ++y)
                if ((y - pix(t)) % (2 * dash) < dash) put(pix(x), y, c);
    }
    void text(double x, double top, const std::string& s, Rgb c, int scale, Align a) override {
        const int w = static_cast<int>(s.size()) * kCharDots * scale;
        int left = pix(x) - (a == Align::left ? 0 : a == Align::center ? w / 2 : w);
        for (char ch : s) {
            const Glyph& g = glyph(ch);
            for (int r = 0; r < 8; ++r)
                for (int col = 0; r < 8 && g.rows[r] && col < 5; ++col)
                    if (g.rows[r][col] == '#')
                        for (int dy = 0; dy < scale; ++dy)
                            for (int dx = 0; dx < scale; ++dx)
                                put(left + col * scale + dx, pix(top) + r * scale + dy, c);
            left += kCharDots * scale;
        }
    }

  private:
    static int pix(double v) { return static_cast<int>(std::floor(v)); }
    void put(int x, int y, Rgb c) {
        if (x < 0 || y < 0 || x >= img_.width || y >= img_.height) return;
        uint8_t* p = &img_.rgb[(static_cast<size_t>(y) * img_.width + x) * 3];
        p[0] = c.r;
        p[1] = c.g;
        p[2] = c.b;
    }
    // Bresenham with a square brush of half-width r.
    void segment(int x0, int y0, int x1, int y1, Rgb c, int r) {
        const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
        const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
        int err = dx + dy;
        for (;;) {
            for (int by = -r; by <= r; ++by)
                for (int bx = -r; bx <= r; ++bx)
                    put(x0 + bx, y0 + by, c);
            if (x0 == x1 && y0 == y1) break;
            const int e2 = 2 * err;
            if (e2 >= dy) {
                err += dy;
                x0 += sx;
            }
            if (e2 <= dx) {
                err += dx;
                y0 += sy;
            }
        }
    }
    Image img_;
};

// ---- geometry

// Liang-Barsky: clips the segment a-b to the panel rectangle; false when nothing is left.
bool clip(const Panel& p, Point& a, Point& b) {
    double t0 = 0, t1 = 1;
    const double dx = b.x - a.x, dy = b.y - a.y;
    const double q[4][2] = {
        {-dx, a.x - p.left}, {dx, p.right - a.x}, {-dy, a.y - p.top}, {dy, p.bottom - a.y}};
    for (const auto& [pk, qk] : q) {
        if (pk == 0) {
            if (qk < 0) return false;
            continue;
        }
        const double t = qk / pk;
        if (pk < 0)
            t0 = std::max(t0, t);
        else
            t1 = std::min(t1, t);
        if (t0 > t1) return false;
    }
    const Point a0 = a;
    a = {a0.x + t0 * dx, a0.y + t0 * dy};
    b = {a0.x + t1 * dx, a0.y + t1 * dy};
    return true;
}

bool inside(const Panel& p, const Point& q) {
    return q.x >= p.left && q.x <= p.right && q.y >= p.top && q.y <= p.bottom;
}

// Data points -> visible runs of pixel points.
std::vector<std::vector<Point>> pieces_of(const Panel& p, const std::vector<Point>& data) {
    std::vector<std::vector<Point>> pieces;
    std::vector<Point> cur;
    auto flush = [&]() {
        if (!cur.empty()) pieces.push_back(std::move(cur));
        cur.clear();
    };
    for (size_t i = 0; i < data.size(); ++i) {
        const Point q{p.px(data[i].x), p.py(data[i].y)};
        if (data.size() == 1) {
            if (inside(p, q)) cur.push_back(q);
            break;
        }
        if (i == 0) continue;
        Point a{p.px(data[i - 1].x), p.py(data[i - 1].y)}, b = q;
        if (!clip(p, a, b)) {
            flush();
            continue;
        }
        if (cur.empty() || cur.back().x != a.x || cur.back().y != a.y) {
            flush();
            cur.push_back(a);
        }
        cur.push_back(b);
        if (b.x != q.x || b.y != q.y) flush();  // left the panel
    }
    flush();
    return pieces;
}

double nice_step(double lo, double hi, int target) {
    const double raw = (hi - lo) / std::max(1, target);
    const double e = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / e;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * e;
}

std::vector<double> ticks_in(double lo, double hi, double step) {
    std::vector<double> t;
    const double eps = step * 1e-9;
    for (double k = std::ceil((lo - eps) / step); k * step <= hi + eps && t.size() < 1000; ++k)
        t.push_back(std::abs(k * step) < eps ? 0.0 : k * step);
    return t;
}

std::string tick_label(double v, const std::vector<double>& ticks) {
    const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1;
    const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 10), v);
    return buf;
}

// Fills a panel's range and ticks from the data and the given bounds (NaN: from the data).
void set_range(double data_lo, double data_hi, double given_lo, double given_hi, int target,
               const char* what, double& lo, double& hi, std::vector<double>& ticks) {
    if (!(data_lo <= data_hi)) data_lo = 0, data_hi = 1;  // no data
    if (data_lo == data_hi) {
        const double pad = data_lo == 0 ? 1 : std::abs(data_lo) * 0.1;
        data_lo -= pad;
        data_hi += pad;
    }
    lo = std::isnan(given_lo) ? data_lo : given_lo;
    hi = std::isnan(given_hi) ? data_hi : given_hi;
    TRIT_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo < hi, "plot: ", what, " range [", lo,
               ", ", hi, "] is empty; expected min < max");
    const double step = nice_step(lo, hi, target);
    if (std::isnan(given_lo)) lo = std::floor(lo / step + 1e-9) * step;
    if (std::isnan(given_hi)) hi = std::ceil(hi / step - 1e-9) * step;
    ticks = ticks_in(lo, hi, step);
}

void extend(const std::vector<Point>& pts, bool use_x, double& lo, double& hi) {
    for (const auto& p : pts) {
        const double v = use_x ? p.x : p.y;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
}

int label_chars(const Panel& p) {
    size_t n = 0;
    for (double t : p.y_ticks)
        n = std::max(n, tick_label(t, p.y_ticks).size());
    return static_cast<int>(n);
}

std::string fit(const std::string& s, size_t max_chars) {
    if (s.size() <= max_chars) return s;
    return max_chars <= 3 ? s.substr(0, max_chars) : s.substr(0, max_chars - 3) + "...";
}

// Legend items laid out left to right, wrapping; returns each item's (x, row).
std::vector<std::pair<int, int>> legend_slots(const std::vector<RunCurves>& runs, int left,
                                              int right, int scale) {
    std::vector<std::pair<int, int>> slots;
    int x = left, row = 0;
    for (const auto& r : runs) {
        const int w = (4 + static_cast<int>(fit(r.name, 40).size()) + 3) * kCharDots * scale;
        if (x > left && x + w > right) x = left, ++row;
        slots.push_back({x, row});
        x += w;
    }
    return slots;
}

std::vector<StageMark> stage_starts(const std::vector<RunCurves>& runs) {
    std::vector<StageMark> marks;
    for (const auto& r : runs)
        for (const auto& s : r.stages) {
            if (s.step == 0) continue;
            const bool seen = std::any_of(marks.begin(), marks.end(), [&](const StageMark& m) {
                return m.step == s.step && m.levels == s.levels;
            });
            if (!seen) marks.push_back(s);
        }
    return marks;
}

// The whole chart, through either painter.
void draw(Painter& pt, const std::vector<RunCurves>& runs, const PlotOptions& o,
          const ChartLayout& L) {
    const int s = L.text_scale;
    pt.fill(0, 0, L.width, L.height, kWhite);
    if (!o.title.empty()) {
        const size_t max_chars = (L.width - 16 * s) / (kCharDots * (s + 1));
        pt.text(L.width / 2.0, L.title_y, fit(o.title, max_chars), kInk, s + 1, Align::center);
    }
    if (runs.size() > 1) {
        const auto slots =
            legend_slots(runs, static_cast<int>(L.loss.left), static_cast<int>(L.loss.right), s);
        for (size_t i = 0; i < runs.size(); ++i) {
            const double x = slots[i].first, y = L.legend_y + slots[i].second * kLineDots * s;
            pt.line(x, y + 4 * s, x + 3 * kCharDots * s, y + 4 * s, series_color(i), 2 * s);
            pt.text(x + 4 * kCharDots * s, y, fit(runs[i].name, 40), kInk, s, Align::left);
        }
    }
    for (const Panel* p : {&L.loss, &L.metric}) {
        pt.text(p->left, p->top - kLineDots * s, p->label, kInk, s, Align::left);
        for (double t : p->x_ticks) {
            const double x = std::floor(p->px(t));
            pt.line(x, p->top, x, p->bottom, kGrid, 1);
            pt.line(x, p->bottom, x, p->bottom + 3 * s, kInk, 1);
            pt.text(x, p->bottom + 4 * s, tick_label(t, p->x_ticks), kInk, s, Align::center);
        }
        for (double t : p->y_ticks) {
            const double y = std::floor(p->py(t));
            pt.line(p->left, y, p->right, y, kGrid, 1);
            pt.line(p->left - 3 * s, y, p->left, y, kInk, 1);
            pt.text(p->left - 5 * s, y - 4 * s, tick_label(t, p->y_ticks), kInk, s, Align::right);
        }
        pt.line(p->left, p->top, p->right, p->top, kInk, 1);
        pt.line(p->left, p->bottom, p->right, p->bottom, kInk, 1);
        pt.line(p->left, p->top, p->left, p->bottom, kInk, 1);
        pt.line(p->right, p->top, p->right, p->bottom, kInk, 1);
    }
    const int radius = 1 + s;
    auto visible = [](const Panel& p, const std::vector<Point>& data) {
        std::vector<Point> out;
        for (const auto& d : data)
            if (inside(p, {p.px(d.x), p.py(d.y)})) out.push_back({p.px(d.x), p.py(d.y)});
        return out;
    };
    for (size_t i = 0; i < runs.size(); ++i) {
        const Rgb c = series_color(i);
        pt.series(pieces_of(L.loss, runs[i].train_loss), c, s, "train-loss");
        if (!runs[i].eval_loss.empty()) {
            pt.series(pieces_of(L.loss, runs[i].eval_loss), c, 1, "eval-loss");
            pt.markers(visible(L.loss, runs[i].eval_loss), c, radius);
        }
        if (!runs[i].eval_metric.empty()) {
            pt.series(pieces_of(L.metric, runs[i].eval_metric), c, s, "eval-metric");
            pt.markers(visible(L.metric, runs[i].eval_metric), c, radius);
        }
    }
    for (const auto& m : stage_starts(runs)) {
        const double x = std::floor(L.loss.px(m.step));
        if (x < L.loss.left || x > L.loss.right) continue;
        pt.dashed(x, {{L.loss.top, L.loss.bottom}, {L.metric.top, L.metric.bottom}}, kStage, 3 * s);
        pt.text(x + 3 * s, L.loss.top + 3 * s, "levels " + std::to_string(m.levels), kStage, s,
                Align::left);
    }
    pt.text((L.metric.left + L.metric.right) / 2, L.x_label_y, "step", kInk, s, Align::center);
}

}  // namespace

// ---- reading

RunCurves parse_metrics(const std::string& text, const std::string& what, const std::string& name) {
    RunCurves r;
    r.name = name;
    std::vector<Point> accuracy, bpb;
    std::istringstream in(text);
    std::string raw;
    size_t line_no = 0, lines = 0;
    auto finite = [](double v) { return std::isfinite(v); };
    while (std::getline(in, raw)) {
        ++line_no;
        const std::string line = trim(raw);
        if (line.empty()) continue;
        ++lines;
        const std::string where = what + ":" + std::to_string(line_no);
        TRIT_CHECK(line.front() == '{' && line.back() == '}', "'", where,
                   "': expected one JSON object {...} per line, got '", fit(line, 40), "'");
        const double step = trainers::json_number(line, "step", where);
        TRIT_CHECK(finite(step), "'", where, "': \"step\" is not a finite number");
        auto num = [&](const char* key) { return trainers::json_number(line, key, where); };
        auto add = [&](std::vector<Point>& to, double v) {
            if (finite(v)) to.push_back({step, v});
        };
        if (trainers::json_has(line, "loss")) {
            add(r.train_loss, num("loss"));
        } else if (trainers::json_has(line, "eval_loss") ||
                   trainers::json_has(line, "eval_accuracy") ||
                   trainers::json_has(line, "eval_bits_per_byte")) {
            if (trainers::json_has(line, "eval_loss")) add(r.eval_loss, num("eval_loss"));
            if (trainers::json_has(line, "eval_accuracy"))
                add(accuracy, 100 * num("eval_accuracy"));
            if (trainers::json_has(line, "eval_bits_per_byte")) {
                r.language_model = true;
                add(bpb, num("eval_bits_per_byte"));
            }
        } else if (trainers::json_has(line, "stage") && trainers::json_has(line, "levels")) {
            const double levels = num("levels");
            TRIT_CHECK(finite(levels) && levels >= 1, "'", where,
                       "': \"levels\" must be a count >= 1");
            r.stages.push_back({step, static_cast<int64_t>(std::llround(levels))});
        }
    }
    TRIT_CHECK(lines > 0, "'", what,
               "': empty; expected metrics lines (has the run logged a step yet?)");
    r.eval_metric = r.language_model ? bpb : accuracy;
    return r;
}

RunCurves read_run_curves(const std::string& run_dir) {
    TRIT_CHECK(fs::is_dir(run_dir), "'", run_dir,
               "': no such directory; expected a run directory holding metrics.jsonl");
    const std::string path = fs::join(run_dir, "metrics.jsonl");
    TRIT_CHECK(fs::is_file(path), "'", path, "': no such file (is '", run_dir,
               "' a run directory?)");
    std::ifstream in(path, std::ios::binary);
    TRIT_CHECK(in.good(), "'", path, "': cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    return parse_metrics(text.str(), path, run_name(run_dir));
}

// ---- layout

std::vector<double> nice_ticks(double& lo, double& hi, int target, bool widen) {
    const double step = nice_step(lo, hi, target);
    if (widen) {
        lo = std::floor(lo / step + 1e-9) * step;
        hi = std::ceil(hi / step - 1e-9) * step;
    }
    return ticks_in(lo, hi, step);
}

ChartLayout layout_chart(const std::vector<RunCurves>& runs, const PlotOptions& o) {
    using Side = std::pair<int, const char*>;
    for (const auto& [v, name] : {Side{o.width, "width"}, Side{o.height, "height"}})
        TRIT_CHECK(v >= kPlotMinSize && v <= kPlotMaxSize, "plot ", name, " ", v, ": expected ",
                   kPlotMinSize, " to ", kPlotMaxSize, " pixels");
    const RunCurves* lm = nullptr;
    const RunCurves* cls = nullptr;
    for (const auto& r : runs)
        if (!r.eval_metric.empty()) (r.language_model ? lm : cls) = &r;
    TRIT_CHECK(!lm || !cls, "plot: '", lm ? lm->name : "",
               "' is a language model (bits per byte) and '", cls ? cls->name : "",
               "' a classifier (accuracy); plot them separately");

    ChartLayout L;
    L.width = o.width;
    L.height = o.height;
    const int s = std::clamp(
        static_cast<int>(std::lround(std::min(o.width / 480.0, o.height / 360.0))), 1, 4);
    L.text_scale = s;
    const int ch = kCharDots * s, lh = kLineDots * s, margin = 8 * s, tick = 3 * s;

    double x_lo = 0, x_hi = -INFINITY, loss_lo = INFINITY, loss_hi = -INFINITY, m_lo = INFINITY,
           m_hi = -INFINITY;
    for (const auto& r : runs) {
        for (const auto* v : {&r.train_loss, &r.eval_loss, &r.eval_metric})
            extend(*v, true, x_lo, x_hi);
        for (const auto& st : r.stages)
            x_hi = std::max(x_hi, st.step);
        extend(r.train_loss, false, loss_lo, loss_hi);
        extend(r.eval_loss, false, loss_lo, loss_hi);
        extend(r.eval_metric, false, m_lo, m_hi);
    }
    if (x_hi == -INFINITY) x_hi = 1;
    Panel& a = L.loss;
    Panel& b = L.metric;
    set_range(x_lo, x_hi, o.x_min, o.x_max, 6, "step", a.x_lo, a.x_hi, a.x_ticks);
    set_range(loss_lo, loss_hi, o.loss_min, o.loss_max, 5, "loss", a.y_lo, a.y_hi, a.y_ticks);
    set_range(m_lo, m_hi, o.metric_min, o.metric_max, 5, lm ? "bits per byte" : "accuracy", b.y_lo,
              b.y_hi, b.y_ticks);
    b.x_lo = a.x_lo;
    b.x_hi = a.x_hi;
    b.x_ticks = a.x_ticks;
    a.label = "loss (line: training, dots: evaluation)";
    b.label = lm ? "validation bits per byte" : "evaluation accuracy (%)";

    int y = margin;
    L.title_y = y;
    if (!o.title.empty()) y += kLineDots * (s + 1);
    size_t x_label = 0;
    for (double t : a.x_ticks)
        x_label = std::max(x_label, tick_label(t, a.x_ticks).size());
    const int left = margin + std::max(label_chars(a), label_chars(b)) * ch + tick + 2 * s;
    const int right = o.width - margin - static_cast<int>(x_label + 1) * ch / 2;
    L.legend_y = y;
    if (runs.size() > 1) y += (legend_slots(runs, left, right, s).back().second + 1) * lh + 2 * s;
    L.x_label_y = o.height - margin - lh;
    const int block = lh + tick + lh + s;  // the label above a panel and the tick labels below it
    const int panel_h = (static_cast<int>(L.x_label_y) - y - 2 * block - 2 * s) / 2;
    TRIT_CHECK(panel_h >= 20 && right - left >= 40, "plot: ", o.width, "x", o.height,
               " leaves no room for the panels; make the image larger");
    a.left = b.left = left;
    a.right = b.right = right;
    a.top = y + lh;
    a.bottom = a.top + panel_h;
    b.top = a.bottom + block + 2 * s;
    b.bottom = b.top + panel_h;
    return L;
}

// ---- rendering

Rgb series_color(size_t i) {
    static const Rgb kPalette[] = {
        {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
        {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
    return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
}

Rgb Image::at(int x, int y) const {
    TRIT_CHECK(x >= 0 && y >= 0 && x < width && y < height, "pixel (", x, ", ", y, ") outside ",
               width, "x", height);
    const uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
    return {p[0], p[1], p[2]};
}

std::string render_svg(const std::vector<RunCurves>& runs, const PlotOptions& options) {
    const ChartLayout L = layout_chart(runs, options);
    SvgPainter p(L.width, L.height);
    draw(p, runs, options, L);
    return p.finish();
}

Image render_image(const std::vector<RunCurves>& runs, const PlotOptions& options) {
    const ChartLayout L = layout_chart(runs, options);
    RasterPainter p(L.width, L.height);
    draw(p, runs, options, L);
    return p.finish();
}

std::string encode_png(const Image& image) {
    TRIT_CHECK(image.width > 0 && image.height > 0 &&
                   image.rgb.size() == static_cast<size_t>(image.width) * image.height * 3,
               "encode_png: ", image.width, "x", image.height, " image holds ", image.rgb.size(),
               " bytes; expected width*height*3");
    const size_t row = static_cast<size_t>(image.width) * 3;
    std::string raw;
    raw.reserve((row + 1) * image.height);
    for (int y = 0; y < image.height; ++y) {
        raw += '\0';  // filter type 0 (none)
        raw.append(reinterpret_cast<const char*>(&image.rgb[y * row]), row);
    }
    uLongf packed_size = compressBound(raw.size());
    std::string packed(packed_size, '\0');
    const int rc = compress(reinterpret_cast<Bytef*>(&packed[0]), &packed_size,
                            reinterpret_cast<const Bytef*>(raw.data()), raw.size());
    TRIT_CHECK(rc == Z_OK, "encode_png: zlib compress failed (", rc, ")");
    packed.resize(packed_size);

    auto be32 = [](uint32_t v) {
        return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                           static_cast<char>(v >> 8), static_cast<char>(v)};
    };
    auto chunk = [&](const char* type, const std::string& data) {
        const std::string body = std::string(type, 4) + data;
        const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(body.data()), body.size());
        return be32(static_cast<uint32_t>(data.size())) + body + be32(static_cast<uint32_t>(crc));
    };
    // width, height, bit depth 8, colour type 2 (RGB), compression 0, filter 0, no interlace
    const std::string ihdr = be32(image.width) + be32(image.height) + std::string{8, 2, 0, 0, 0};
    return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IDAT", packed) +
           chunk("IEND", "");
}

}  // namespace trit::cli
