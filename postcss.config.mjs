// Tailwind CSS v4 through PostCSS, as Next.js loads it.
export default {
  plugins: {
    '@tailwindcss/postcss': {},
  },
};
