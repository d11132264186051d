//! Mouse and keyboard: orbit, pan, zoom, pause, step, reset, frame, colour,
//! scene keys.

use super::*;

impl WindowState {
    pub(super) fn input(&mut self, event: &WindowEvent, cache: Option<PathBuf>) {
        match event {
            WindowEvent::MouseInput { state, button, .. } => {
                self.drag = (*state == ElementState::Pressed).then_some(*button);
            }
            WindowEvent::CursorMoved { position, .. } => {
                let (dx, dy) = (position.x - self.cursor.x, position.y - self.cursor.y);
                self.cursor = *position;
                let h = self.config.height.max(1) as f32;
                match self.drag {
                    Some(MouseButton::Left) => {
                        self.camera.orbit(-dx as f32 * 0.008, dy as f32 * 0.008)
                    }
                    Some(MouseButton::Right) => self.camera.pan(dx as f32 / h, dy as f32 / h),
                    _ => {}
                }
            }
            WindowEvent::MouseWheel { delta, .. } => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / 40.0,
                };
                self.camera.zoom(0.9f32.powf(lines));
            }
            WindowEvent::KeyboardInput { event, .. } if event.state == ElementState::Pressed => {
                match &event.logical_key {
                    Key::Named(NamedKey::Space) => self.paused = !self.paused,
                    Key::Character(c) => match c.as_str() {
                        "." => self.step_once = true,
                        "r" | "R" => {
                            let p = self.playing.path.clone();
                            self.switch_to(p, cache);
                        }
                        "f" | "F" => {
                            let (min, max) = frame_box(&self.playing.setup);
                            let pos = self
                                .playing
                                .sim
                                .host_state()
                                .map(|s| s.pos)
                                .unwrap_or_default();
                            self.camera = Camera::frame_particles(&pos, min, max);
                        }
                        "c" | "C" => {
                            self.colour = match self.colour {
                                ColourMode::ByBody => ColourMode::BySpeed,
                                ColourMode::BySpeed => ColourMode::ByBody,
                            }
                        }
                        d => {
                            if let Ok(k) = d.parse::<usize>()
                                && (1..=9).contains(&k)
                                && let Some(p) = self.siblings.get(k - 1).cloned()
                            {
                                self.switch_to(p, cache);
                            }
                        }
                    },
                    _ => {}
                }
            }
            _ => {}
        }
    }
}
