/** A message as chat templates see it. */
export interface TemplateMessage {
  role: string;
  content: string;
  name?: string;
}

export interface RendererData {
  source: string;
  bosToken?: string;
  eosToken?: string;
  /** Longest rendered prompt accepted (characters). */
  maxChars: number;
}

export interface RenderRequest {
  id: number;
  messages: TemplateMessage[];
}

export type RenderReply = { id: number; text: string } | { id: number; error: string };
