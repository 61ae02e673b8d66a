// The balance-and-nonce chart (uPlot): balance and reserved on the left axis, nonce on the right.
import { html, useEffect, useRef } from '../vendor/preact-htm.js';
import uPlot from '../vendor/uplot.js';

export function BalanceChart({ series }) {
  const el = useRef(null);
  useEffect(() => {
    if (!el.current || !series || series.points.length === 0) return undefined;
    const p = series.points;
    const data = [p.map((x) => x.t), p.map((x) => Number(x.balance)), p.map((x) => Number(x.reserved)), p.map((x) => x.nonce)];
    const width = () => Math.max(280, el.current.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 240,
        series: [
          {},
          { label: 'balance', stroke: '#2563eb', width: 2, scale: 'money' },
          { label: 'reserved', stroke: '#d97706', width: 1, scale: 'reserved' },
          { label: 'nonce', stroke: '#059669', width: 2, scale: 'nonce', paths: uPlot.paths.stepped({ align: 1 }) },
        ],
        axes: [{}, { scale: 'money', size: 90 }, { scale: 'nonce', side: 1, grid: { show: false } }],
        scales: { x: { time: true } },
      },
      data,
      el.current,
    );
    const resize = () => plot.setSize({ width: width(), height: 240 });
    addEventListener('resize', resize);
    return () => {
      removeEventListener('resize', resize);
      plot.destroy();
    };
  }, [series]);
  return html`<div class="chart" ref=${el} id="balance-chart"></div>`;
}
