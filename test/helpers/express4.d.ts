// express4 is `npm:express@^4` (see package.json): same API surface the differential test uses as Express 5's.
declare module 'express4' {
  import express from 'express';
  export default express;
}
