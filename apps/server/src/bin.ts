#!/usr/bin/env node
import { serveMain } from './main.js';

process.exitCode = await serveMain(process.argv.slice(2));
