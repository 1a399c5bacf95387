import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { barChart, lineChart, renderSvg } from "../../../bench/chart.js";

/** Text of every <text> element of an SVG document (legend entries, titles, labels). */
const texts = (svg: string): string[] =>
  [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);

describe("bench charts", () => {
  test("a line chart renders one path per series, with each series in the legend", async () => {
    const svg = await renderSvg(
      lineChart({
        title: "pods Ready over time",
        xTitle: "seconds",
        yTitle: "pods Ready",
        step: true,
        points: [
          { series: "ours", x: 0, y: 0 },
          { series: "ours", x: 1, y: 5 },
          { series: "ours", x: 2, y: 11 },
          { series: "peer", x: 0, y: 0 },
          { series: "peer", x: 3, y: 11 },
        ],
      }),
    );
    assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    const labels = texts(svg);
    for (const want of ["ours", "peer", "pods Ready over time", "seconds", "pods Ready"])
      assert.ok(labels.includes(want), `"${want}" missing from ${JSON.stringify(labels)}`);
    // One line mark per series, each drawn through its own points.
    const lines = [
      ...svg.matchAll(/<path aria-label="([^"]*)"[^>]*aria-roledescription="line mark"/g),
    ];
    assert.deepEqual(
      lines.map((m) => /series: (\w+)/.exec(m[1])?.[1]),
      ["ours", "peer"],
      svg,
    );
  });

  test("a faceted line chart has one panel per facet value", async () => {
    const svg = await renderSvg(
      lineChart({
        title: "t",
        xTitle: "x",
        yTitle: "y",
        facet: { field: "workload", title: "workload" },
        points: [
          { series: "a", x: 0, y: 1, workload: "50x10" },
          { series: "a", x: 1, y: 2, workload: "1x1000" },
        ],
      }),
    );
    const labels = texts(svg);
    assert.ok(labels.includes("50x10") && labels.includes("1x1000"), JSON.stringify(labels));
  });

  test("a bar chart draws one bar per value, labelled with the value", async () => {
    const svg = await renderSvg(
      barChart({
        title: "converge",
        yTitle: "ms",
        bars: [
          { group: "50x10", series: "ours", value: 9459 },
          { group: "50x10", series: "peer", value: 12001 },
        ],
      }),
    );
    const bars = svg.match(/aria-roledescription="bar"/g) ?? [];
    assert.equal(bars.length, 2, svg);
    const labels = texts(svg);
    for (const want of ["9,459", "12,001", "ours", "peer", "50x10"])
      assert.ok(labels.includes(want), `"${want}" missing from ${JSON.stringify(labels)}`);
  });
});
