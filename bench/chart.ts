/**
 * The benchmarks' charts: Vega-Lite specifications compiled to Vega and rendered to SVG in
 * Node (headless view, no canvas, no browser). Every chart of bench/results/ is made here.
 */
import { parse, View } from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** A Vega-Lite specification, as written by the helpers below. */
export type ChartSpec = TopLevelSpec;

/** One point of a line: `series` names the line. */
export interface LinePoint {
  series: string;
  x: number;
  y: number;
}

/** One bar: `group` is the x position, `series` the colour within it. */
export interface Bar {
  group: string;
  series: string;
  value: number;
}

const WIDTH = 640;
const HEIGHT = 320;

/**
 * Lines, one per series, optionally split into small multiples by `facet` (a field of each
 * point). `step` draws a staircase (counts that jump, like pods Ready over time).
 */
export function lineChart(opts: {
  title: string;
  xTitle: string;
  yTitle: string;
  points: (LinePoint & Record<string, string | number>)[];
  step?: boolean;
  facet?: { field: string; title: string; columns?: number };
}): ChartSpec {
  const unit = {
    mark: {
      type: "line" as const,
      interpolate: opts.step ? ("step-after" as const) : ("linear" as const),
      point: !opts.step,
    },
    encoding: {
      x: { field: "x", type: "quantitative" as const, title: opts.xTitle },
      y: { field: "y", type: "quantitative" as const, title: opts.yTitle },
      color: { field: "series", type: "nominal" as const, title: null },
    },
  };
  const base = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: opts.title,
    data: { values: opts.points },
    background: "white",
  };
  if (!opts.facet) return { ...base, width: WIDTH, height: HEIGHT, ...unit };
  return {
    ...base,
    facet: { field: opts.facet.field, type: "nominal", title: opts.facet.title },
    columns: opts.facet.columns ?? 3,
    resolve: { scale: { x: "independent", y: "independent" } },
    spec: { width: 280, height: 200, ...unit },
  };
}

/** Grouped bars: one group per `group`, one bar per series in it, value labels on top. */
export function barChart(opts: { title: string; yTitle: string; bars: Bar[] }): ChartSpec {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: opts.title,
    background: "white",
    data: { values: opts.bars },
    width: { step: 36 },
    height: HEIGHT,
    encoding: {
      x: { field: "group", type: "nominal", title: null, sort: null, axis: { labelAngle: -20 } },
      xOffset: { field: "series", type: "nominal" },
      y: { field: "value", type: "quantitative", title: opts.yTitle },
      color: { field: "series", type: "nominal", title: null },
    },
    layer: [
      { mark: { type: "bar" } },
      {
        mark: { type: "text", dy: -6, fontSize: 9 },
        encoding: { text: { field: "value", type: "quantitative", format: ",.0f" } },
      },
    ],
  };
}

/** Renders a Vega-Lite specification to a standalone SVG document. */
export async function renderSvg(spec: ChartSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
