/**
 * A dependency-free SVG line chart of the best speedup after each iteration.
 *
 * Why plain SVG: the webview must work offline and under a strict content security policy,
 * and one polyline with axes is all the run view needs; no charting library is worth its
 * weight here. Pure function, unit-tested.
 */

export interface ChartOptions {
  width?: number;
  height?: number;
}

function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** Round a maximum up to a tidy axis limit (1, 1.5, 2, 3, 5, 10 times a power of ten). */
export function niceCeiling(value: number): number {
  if (!(value > 0)) {
    return 1;
  }
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 1.5, 2, 3, 5, 10]) {
    if (step * power >= value - 1e-12) {
      return step * power;
    }
  }
  return 10 * power;
}

/**
 * Render `values[i]` = best speedup after iteration i+1 (1.0 = the original kernel).
 * Returns a complete `<svg>` element; an empty series renders a labelled empty chart.
 */
export function speedupChartSvg(values: number[], options: ChartOptions = {}): string {
  const width = options.width ?? 520;
  const height = options.height ?? 220;
  const left = 48;
  const right = 16;
  const top = 16;
  const bottom = 36;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const finite = values.filter((v) => Number.isFinite(v));
  const yMax = niceCeiling(Math.max(1, ...finite));
  const n = values.length;
  const x = (i: number): number => left + (n <= 1 ? plotW / 2 : (plotW * i) / (n - 1));
  const y = (v: number): number => top + plotH - (plotH * Math.max(0, v)) / yMax;

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${width} ${height}" style="width: 100%; max-width: ${width}px; height: auto" role="img" aria-label="Best speedup per iteration">`,
  );
  // Horizontal grid lines with labels at 0, 1/4, ..., yMax.
  for (let k = 0; k <= 4; k++) {
    const v = (yMax * k) / 4;
    const yy = y(v).toFixed(1);
    parts.push(`<line class="grid" x1="${left}" y1="${yy}" x2="${width - right}" y2="${yy}" />`);
    parts.push(`<text class="axis" x="${left - 6}" y="${yy}" text-anchor="end" dominant-baseline="middle">${esc(v.toFixed(v < 10 ? 2 : 0))}x</text>`);
  }
  // The baseline: the original kernel's speed.
  const one = y(1).toFixed(1);
  parts.push(`<line class="baseline" x1="${left}" y1="${one}" x2="${width - right}" y2="${one}" stroke-dasharray="4 3" />`);
  parts.push(`<text class="axis" x="${left + plotW / 2}" y="${height - 6}" text-anchor="middle">iteration</text>`);
  if (n === 0) {
    parts.push(`<text class="empty" x="${left + plotW / 2}" y="${top + plotH / 2}" text-anchor="middle">no iteration finished yet</text>`);
  } else {
    values.forEach((_, i) => {
      parts.push(`<text class="axis" x="${x(i).toFixed(1)}" y="${top + plotH + 14}" text-anchor="middle">${i + 1}</text>`);
    });
    const points = values
      .map((v, i) => (Number.isFinite(v) ? `${x(i).toFixed(1)},${y(v).toFixed(1)}` : ""))
      .filter((p) => p !== "")
      .join(" ");
    parts.push(`<polyline class="line" fill="none" points="${points}" />`);
    values.forEach((v, i) => {
      if (Number.isFinite(v)) {
        parts.push(
          `<circle class="point" cx="${x(i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="3.5"><title>iteration ${i + 1}: ${esc(v.toFixed(2))}x</title></circle>`,
        );
      }
    });
  }
  parts.push("</svg>");
  return parts.join("");
}
