//! The egui side panel: scene picker, live parameters, rates, statistics
//! and the step-time plot.

use super::*;

impl WindowState {
    pub(super) fn panel(&mut self, root: &mut egui::Ui) -> (bool, Option<PathBuf>, bool) {
        let mut changed = false;
        let mut switch = None;
        let mut reset = false;
        egui::Panel::left("pellet")
            .resizable(false)
            .show(root, |ui| {
                ui.heading("Pellet");
                egui::ComboBox::from_label("scene")
                    .selected_text(self.playing.setup.name.clone())
                    .show_ui(ui, |ui| {
                        for p in &self.siblings {
                            let name = p
                                .file_stem()
                                .map(|s| s.to_string_lossy().into_owned())
                                .unwrap_or_default();
                            if ui.selectable_label(*p == self.playing.path, name).clicked() {
                                switch = Some(p.clone());
                            }
                        }
                    });
                ui.horizontal(|ui| {
                    if ui
                        .button(if self.paused { "play" } else { "pause" })
                        .clicked()
                    {
                        self.paused = !self.paused;
                    }
                    if ui.button("step").clicked() {
                        self.step_once = true;
                    }
                    if ui.button("reset").clicked() {
                        reset = true;
                    }
                });
                ui.separator();
                let live = &mut self.playing.live;
                ui.label("gravity y (m/s²)");
                changed |= ui
                    .add(egui::Slider::new(&mut live.gravity[1], -30.0..=30.0))
                    .changed();
                ui.label(if live.hertz {
                    "Young's modulus (x scene)"
                } else {
                    "stiffness (x scene)"
                });
                changed |= ui
                    .add(egui::Slider::new(&mut live.stiffness_scale, 0.1..=4.0).logarithmic(true))
                    .changed();
                ui.label("restitution");
                changed |= ui
                    .add(egui::Slider::new(&mut live.restitution, 0.01..=1.0))
                    .changed();
                ui.label("friction");
                changed |= ui
                    .add(egui::Slider::new(&mut live.friction, 0.0..=1.5))
                    .changed();
                if live.hertz {
                    ui.label("Poisson's ratio");
                    changed |= ui
                        .add(egui::Slider::new(&mut live.poisson, 0.0..=0.49))
                        .changed();
                }
                if live.rolling {
                    ui.label("rolling friction");
                    changed |= ui
                        .add(egui::Slider::new(&mut live.rolling_friction, 0.0..=1.0))
                        .changed();
                }
                ui.label("time step (s)");
                changed |= ui
                    .add(egui::Slider::new(&mut live.dt, 1e-6..=1e-3).logarithmic(true))
                    .changed();
                ui.label("most substeps per frame");
                ui.add(egui::Slider::new(&mut live.max_substeps, 1..=2000));
                ui.separator();
                let mut speed = self.colour == ColourMode::BySpeed;
                if ui.checkbox(&mut speed, "colour by speed").changed() {
                    self.colour = if speed {
                        ColourMode::BySpeed
                    } else {
                        ColourMode::ByBody
                    };
                }
                ui.separator();
                let (fps, steps_per_s) = self.rates.rates();
                ui.label(format!(
                    "{} fps, {} steps/s ({:.3}x real time)",
                    rate_text(fps),
                    rate_text(steps_per_s),
                    steps_per_s * self.playing.live.dt
                ))
                .on_hover_text(format!(
                    "measured over the last {:.1} s of wall-clock time",
                    self.rates.span_s()
                ));
                let mean = if self.step_ms.is_empty() {
                    0.0
                } else {
                    self.step_ms.iter().sum::<f32>() / self.step_ms.len() as f32
                };
                ui.label(format!("{mean:.2} ms per step"));
                ui.label(format!(
                    "{} particles, {} bodies",
                    self.playing.setup.particles.len(),
                    self.playing.setup.bodies.len()
                ));
                if let Some(s) = &self.playing.stats {
                    ui.label(format!("t = {:.3} s, step {}", s.time, s.step));
                    ui.label(format!(
                        "{} contacts, {} on walls",
                        s.contacts, s.wall_contacts
                    ));
                    ui.label(format!("max {} per cell", s.max_cell_occupancy));
                    ui.label(format!("{} contact-slot overflows", s.slot_overflows));
                }
                if self.behind {
                    ui.colored_label(egui::Color32::from_rgb(200, 80, 0), "slower than real time");
                }
                if let Some(m) = &self.message {
                    ui.colored_label(egui::Color32::RED, m);
                }
                // Step time over the last frames.
                let (rect, _) =
                    ui.allocate_exact_size(egui::vec2(200.0, 60.0), egui::Sense::hover());
                let painter = ui.painter_at(rect);
                painter.rect_filled(rect, 2.0, egui::Color32::from_gray(235));
                let top = self.step_ms.iter().copied().fold(1e-3f32, f32::max);
                let n = self.step_ms.len().max(2);
                let points: Vec<egui::Pos2> = self
                    .step_ms
                    .iter()
                    .enumerate()
                    .map(|(k, &v)| {
                        egui::pos2(
                            rect.left() + rect.width() * k as f32 / (n - 1) as f32,
                            rect.bottom() - rect.height() * v / top,
                        )
                    })
                    .collect();
                painter.add(egui::Shape::line(
                    points,
                    egui::Stroke::new(1.5, egui::Color32::from_rgb(40, 90, 200)),
                ));
                ui.label(format!("step time, max {top:.2} ms"));
            });
        (changed, switch, reset)
    }
}
