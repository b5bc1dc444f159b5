import { useState, type DragEvent, type ReactNode } from 'react';

/** A drop target for photos and folders, highlighted while something is dragged over it. */
export function DropZone({ testId, onDrop, children }: { testId: string; onDrop: (e: DragEvent) => Promise<void>; children: ReactNode }) {
  const [dragging, setDragging] = useState(false);
  return (
    <div
      className={`dropzone${dragging ? ' over' : ''}`}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        void onDrop(e);
      }}
      data-testid={testId}
    >
      {children}
    </div>
  );
}
